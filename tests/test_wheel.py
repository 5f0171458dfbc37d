"""The release as a user installs it: `python -m build` makes an sdist and a wheel; the wheel, installed into a
fresh virtual environment outside the checkout, carries its data (the embedded model, the C++ kernel source,
the Textual styles, the simulator's model configs) and runs `enginetui --version`, the README's first Python
example and `enginetui serve` answering one completion."""

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import httpx
import pytest

from enginetui.serve.process import ServeProcess
from tests.support.checkout import REPO_ROOT, installed_env

pytestmark = pytest.mark.slow

DATA = (  # files the package reads at run time that are not Python modules
    "enginetui/core/models/default_model/opt-tiny/model.safetensors",
    "enginetui/core/models/default_model/opt-tiny/tokenizer.json",
    "enginetui/kernels/csrc/cpu_attention.cpp",
    "enginetui/kernels/csrc/cpu_linear.cpp",
    "enginetui/dashboard/app.tcss",
    "enginetui/vllm_probe/with_vllm.tcss",
    "enginetui/vllm_watch/fleet.tcss",
    "enginetui/simulate/configs/llama-3.1-8b.json",
)


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory) -> tuple[Path, Path]:
    """(the built wheel, the python of a fresh virtual environment with it installed)."""
    root = tmp_path_factory.mktemp("release")
    subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(root / "dist"), REPO_ROOT],
        check=True,
        capture_output=True,
        timeout=600,
    )
    wheel = next((root / "dist").glob("enginetui-*.whl"))
    assert next((root / "dist").glob("enginetui-*.tar.gz"))
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True, timeout=120)
    python = root / "venv" / "bin" / "python"
    # The CPU build of torch first, as the README's set-up does; then the wheel and its dependencies.
    for what in (["torch==2.13.0"], [str(wheel)]):
        subprocess.run([str(python), "-m", "pip", "install", "-q", *what], check=True, capture_output=True, timeout=900)
    return wheel, python


def user_env() -> dict[str, str]:
    """A user's environment: nothing of this checkout or its virtual environment on the path."""
    env = installed_env()
    env.pop("VIRTUAL_ENV", None)
    return env


def test_the_wheel_carries_its_data(wheel_env):
    wheel, _ = wheel_env
    names = set(zipfile.ZipFile(wheel).namelist())
    assert [name for name in DATA if name not in names] == []


def test_the_installed_wheel_runs_outside_the_checkout(wheel_env, tmp_path):
    _, python = wheel_env
    where = subprocess.run(
        [str(python), "-c", "import enginetui; print(enginetui.__file__)"],
        cwd=tmp_path,
        env=user_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    assert not where.stdout.strip().startswith(str(REPO_ROOT))
    version = subprocess.run(
        [str(python.parent / "enginetui"), "--version"],
        cwd=tmp_path,
        env=user_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert version.returncode == 0 and version.stdout.startswith("enginetui 0."), version.stdout + version.stderr


def test_the_readmes_python_example_runs_with_the_wheel(wheel_env, tmp_path):
    _, python = wheel_env
    example = re.search(r"```python\n(.*?)```", (REPO_ROOT / "README.md").read_text(), flags=re.S).group(1)
    script = tmp_path / "example.py"
    script.write_text(example)
    run = subprocess.run(
        [str(python), str(script)], cwd=tmp_path, env=user_env(), capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_installed_wheel_serves_a_completion(wheel_env, tmp_path):
    _, python = wheel_env
    server = ServeProcess(
        "--max-num-seqs", "4", python=str(python), cwd=str(tmp_path), env={"PYTHONPATH": "", "VIRTUAL_ENV": ""}
    )
    try:
        reply = httpx.post(
            f"{server.url}/v1/completions",
            timeout=120,
            json={"prompt": "The function", "max_tokens": 8, "temperature": 0},
        )
        assert reply.status_code == 200, reply.text
        choice = reply.json()["choices"][0]
        assert choice["text"] and choice["finish_reason"] == "length"
    finally:
        assert server.stop() == 0
