"""The repository's `kernels/` folder, on sys.path as top-level `kernels`, yields that name to an
installed `kernels` package (transformers >= 5.25 requires Hugging Face's and imports it)."""

import subprocess
import sys
from pathlib import Path

from tests.support.checkout import REPO_ROOT

CODE = "import kernels; print(getattr(kernels, 'MARK', None), hasattr(kernels, 'select_backend'))"


def _run(pythonpath: list[Path]) -> list[str]:
    env = {"PYTHONPATH": ":".join(str(p) for p in pythonpath), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", CODE], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_an_installed_namesake_gets_the_name(tmp_path):
    installed = tmp_path / "site"
    (installed / "kernels").mkdir(parents=True)
    (installed / "kernels" / "__init__.py").write_text("from kernels.layer import MARK\n")
    (installed / "kernels" / "layer.py").write_text("MARK = 'installed'\n")  # its submodules resolve too
    assert _run([REPO_ROOT, installed]) == ["installed", "False"]


def test_the_namesake_is_looked_up_without_the_repository_root(tmp_path, monkeypatch):
    from enginetui import kernels

    monkeypatch.setattr(sys, "path", [str(REPO_ROOT), str(tmp_path)])
    assert kernels._installed_namesake() is None  # none installed: the folder stays itself
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "__init__.py").write_text("")
    assert kernels._installed_namesake().origin == str(tmp_path / "kernels" / "__init__.py")
    monkeypatch.setattr(sys, "path", ["", str(tmp_path)])
    monkeypatch.chdir(REPO_ROOT)  # "" is the working directory: the repository root is left out as such too
    assert kernels._installed_namesake().origin == str(tmp_path / "kernels" / "__init__.py")
