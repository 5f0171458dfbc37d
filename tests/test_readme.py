"""The README is the front door: every Python example in it runs verbatim as a plain script, outside the
checkout, with the installed package (as the README's setup installs it).

An example that talks to the server the README starts (`enginetui serve`, port 8000) runs with
that server up."""

import contextlib
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from enginetui.serve.process import ServeProcess
from tests.conftest import REPO_ROOT, installed_env

README = Path(REPO_ROOT) / "README.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
SERVER_PORT = 8000  # where the README's `enginetui serve` listens


def test_the_readme_has_python_examples():
    assert len(EXAMPLES) >= 3


def test_the_readme_shows_every_screenshot_and_each_one_it_shows_exists():
    shown = set(re.findall(r"!\[[^\]]*\]\((screenshots/[^)]+)\)", README.read_text()))
    files = {f"screenshots/{path.name}" for path in (Path(REPO_ROOT) / "screenshots").iterdir()}
    assert shown == files


def github_anchor(heading: str) -> str:
    """The id GitHub gives a heading: lower case, punctuation but hyphens and underscores dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def test_every_link_within_the_readme_reaches_a_heading_and_the_contents_name_every_section():
    text = README.read_text()
    headings = re.findall(r"^#+ (.+)$", text, flags=re.M)
    anchors = {github_anchor(h) for h in headings}
    assert github_anchor("Watch the server: `enginetui attach`") == "watch-the-server-enginetui-attach"
    assert set(re.findall(r"\]\(#([^)]+)\)", text)) <= anchors
    contents = text[text.index("**Contents:**"):text.index("\n\n", text.index("**Contents:**"))]
    sections = [github_anchor(h) for h in re.findall(r"^## (.+)$", text, flags=re.M)]
    assert re.findall(r"\]\(#([^)]+)\)", contents) == sections


@pytest.mark.slow  # each example a fresh interpreter that imports torch and starts an engine: 10-40 s
@pytest.mark.timeout(240)
@pytest.mark.parametrize("index", range(len(EXAMPLES)))
def test_readme_example_runs_as_a_script(index, tmp_path):
    script = tmp_path / "example.py"
    script.write_text(EXAMPLES[index])
    with served(EXAMPLES[index]):
        proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                              timeout=200, env=installed_env())  # as a user runs it, after the README's install
    assert proc.returncode == 0, f"example {index} failed:\n{EXAMPLES[index]}\n{proc.stderr[-3000:]}"
    assert proc.stdout.strip(), f"example {index} printed nothing"


@contextlib.contextmanager
def served(example: str):
    """`enginetui serve` on port 8000 while inside, if the example is a client of it."""
    if f"127.0.0.1:{SERVER_PORT}" not in example:
        yield
        return
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", SERVER_PORT)) == 0:
            pytest.skip(f"port {SERVER_PORT}, which the README's server examples use, is taken on this machine")
    server = ServeProcess("--port", str(SERVER_PORT), "--num-gpu-blocks-override", "64", port_arg=False, cwd=REPO_ROOT)
    try:
        yield
    finally:
        assert server.stop() == 0
