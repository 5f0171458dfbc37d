"""The README's server examples run verbatim: `enginetui serve` as the README starts it (port
8000), then every Python block of the "Serve it over HTTP" section as a plain script."""

import re
import socket
import subprocess
import sys

import pytest

from tests.serve.conftest import REPO, ServerProcess

SECTION = "## Serve it over HTTP"
README_PORT = 8000  # the port the README's examples use


def python_blocks(section: str) -> list[str]:
    text = (REPO / "README.md").read_text()
    start = text.index(section)
    end = text.find("\n## ", start + len(section))
    return re.findall(r"```python\n(.*?)```", text[start:end], re.S)


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_the_server_section_has_python_examples():
    assert python_blocks(SECTION)


def test_python_examples_run_against_enginetui_serve(tmp_path):
    if not port_free(README_PORT):
        pytest.skip(f"port {README_PORT}, which the README's examples use, is taken on this machine")
    server = ServerProcess("--port", str(README_PORT), "--num-gpu-blocks-override", "64", port_arg=False)
    try:
        for i, code in enumerate(python_blocks(SECTION)):
            script = tmp_path / f"example_{i}.py"
            script.write_text(code)
            r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, f"README example {i} failed:\n{code}\n{r.stderr}"
            assert r.stdout.strip(), f"README example {i} printed nothing"
    finally:
        assert server.stop() == 0
