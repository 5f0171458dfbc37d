"""enginetui/vllm_launch.py: the interpreter lookup, a server that fails to start (this interpreter has no
vLLM): one error with its log's tail, the log kept, nothing left running; an offline runner's pipes and
log. A real start: tests/vllm_watch/test_live_vllm.py and tests/serve/test_bench_serve_vs_vllm.py."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil
import pytest

from enginetui import bench
from enginetui.vllm_launch import (
    VLLM_PYTHON_ENV,
    VLLMError,
    enginetui_site,
    find_vllm_python,
    start_runner,
    start_server,
    vllm_python,
)


def test_a_vllm_executable_stands_for_the_python_beside_it(monkeypatch, tmp_path):
    python, vllm = tmp_path / "python", tmp_path / "vllm"
    monkeypatch.setenv(VLLM_PYTHON_ENV, str(vllm))
    assert find_vllm_python() is None  # no python there yet
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    assert find_vllm_python() == vllm_python() == str(python)
    monkeypatch.delenv(VLLM_PYTHON_ENV)
    assert find_vllm_python() is None


def test_a_server_that_exits_while_starting_raises_with_its_log(tmp_path):
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(VLLMError, match=r"vLLM's server exited \(code 1\) while starting") as info:
        start_server(sys.executable, str(tmp_path), ["--dtype", "float32"], timeout=60)
    assert "No module named 'vllm'" in str(info.value)  # the log's tail
    log = str(info.value).split("log ", 1)[1].split(":\n", 1)[0]
    assert os.path.exists(log)  # kept: the server failed
    os.unlink(log)
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before


def test_a_server_runs_outside_the_callers_folder(monkeypatch, tmp_path):
    """`python -m` puts the working folder first on sys.path: a `vllm` package there must not be the one run."""
    caller, temporary = tmp_path / "caller", tmp_path / "tmp"
    (caller / "vllm").mkdir(parents=True)
    (caller / "vllm" / "__init__.py").write_text("raise SystemExit('the caller folder shadowed vllm')\n")
    temporary.mkdir()
    monkeypatch.chdir(caller)
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    with pytest.raises(VLLMError, match="No module named 'vllm'") as info:
        start_server(sys.executable, ".", [], log_path=str(tmp_path / "vllm.log"), timeout=60)
    assert "shadowed" not in str(info.value)
    assert list(temporary.iterdir()) == []  # the folder it ran in is gone


def test_nothing_beside_the_runner_shadows_a_standard_module():
    """The runner runs by path: its folder is first on sys.path in vLLM's interpreter."""
    folder = Path(bench.__file__).parent  # vllm_runner.py's
    assert not {path.stem for path in folder.glob("*.py")} & set(sys.stdlib_module_names)


def test_a_runner_talks_over_pipes_logs_its_stderr_and_leaves_nothing(tmp_path):
    script = tmp_path / "echo.py"
    script.write_text(
        "import sys\nprint('to the log', file=sys.stderr, flush=True)\nprint(input().upper(), flush=True)\n"
    )
    runner = start_runner(sys.executable, script, dict(os.environ))
    assert runner.proc.stdin is not None and runner.proc.stdout is not None
    runner.proc.stdin.write("ping\n")
    runner.proc.stdin.flush()
    assert runner.proc.stdout.readline() == "PING\n"
    assert runner.proc.wait(timeout=30) == 0 and runner.log_text() == "to the log\n"
    runner.stop()
    assert not os.path.exists(runner.log_path)  # removed: it did not fail
    failed = start_runner(sys.executable, tmp_path / "missing.py", dict(os.environ))
    failed.proc.wait(timeout=30)
    failed.failed = True
    failed.stop()
    assert "missing.py" in failed.log_text()  # kept: it failed
    os.unlink(failed.log_path)
    for proc in (runner.proc, failed.proc):
        proc.stdin.close()
        proc.stdout.close()


def test_the_site_imports_this_enginetui_as_installed(tmp_path):
    """An interpreter with only the site on its path finds the package and its mapped core/ and kernels/ there
    (vLLM's, for the probe; here this one, isolated from site-packages but for msgspec's folder)."""
    import msgspec

    site = enginetui_site(tmp_path / "site")
    assert enginetui_site(site) == site  # made once
    code = (
        "import enginetui.core.engine.events as e, enginetui.kernels as k, enginetui.vllm_probe.config as c; "
        "print(e.__file__, k.__path__[0], c.__file__)"
    )
    path = os.pathsep.join([str(site), str(Path(msgspec.__file__).parents[1])])
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", f"import sys; sys.path[:0] = {path.split(os.pathsep)!r}; {code}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    events, kernels, config = done.stdout.split()
    assert events == str(site / "enginetui" / "core" / "engine" / "events.py")
    assert kernels == str(site / "enginetui" / "kernels") and config.startswith(str(site / "enginetui"))
