"""The README is the front door: every Python example in it runs verbatim as a plain script."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, checkout_env

README = Path(REPO_ROOT) / "README.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_the_readme_has_python_examples():
    assert len(EXAMPLES) >= 3


@pytest.mark.timeout(240)
@pytest.mark.parametrize("index", range(len(EXAMPLES)))
def test_readme_example_runs_as_a_script(index, tmp_path):
    script = tmp_path / "example.py"
    script.write_text(EXAMPLES[index])
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=200,
                          env=checkout_env())
    assert proc.returncode == 0, f"example {index} failed:\n{EXAMPLES[index]}\n{proc.stderr[-3000:]}"
    assert proc.stdout.strip(), f"example {index} printed nothing"
