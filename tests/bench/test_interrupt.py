"""Ending a benchmark from outside: `kill PID` (SIGTERM) and Ctrl-C stop every process it started,
also a vLLM that is still starting (it reads no request until its start is done: minutes)."""

import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.bench.small_runs import SMALL_ENGINE, SMALL_WORKLOAD
from tests.support.checkout import REPO_ROOT

START_TIMEOUT_S = 180.0  # our engine's start before vLLM's, on a machine busy with other tests
EXIT_TIMEOUT_S = 30.0  # from the signal to the benchmark's exit; asking the starting vLLM to quit took 90 s


def a_vllm_that_never_starts(folder: Path) -> tuple[Path, Path]:
    """An executable given as vLLM's interpreter that writes its pid, then sleeps (reading nothing);
    (its path, the pid file)."""
    pid_file, python = folder / "vllm.pid", folder / "python"
    python.write_text(f"#!/bin/sh\necho $$ > {pid_file}.tmp && mv {pid_file}.tmp {pid_file}\nexec sleep 600\n")
    python.chmod(0o755)
    return python, pid_file


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_a_signal_ends_the_benchmark_and_the_vllm_still_starting(tiny_opt_dir, tmp_path, sig):
    python, pid_file = a_vllm_that_never_starts(tmp_path)
    bench = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "enginetui",
            "bench",
            "throughput",
            "--model",
            tiny_opt_dir,
            *SMALL_ENGINE,
            *SMALL_WORKLOAD,
            "--compare",
            "vllm",
            "--vllm-python",
            str(python),
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as from a terminal, not a background job
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not pid_file.exists():  # our engine is up and vLLM's start was asked for
            assert bench.poll() is None, bench.communicate()
            assert time.monotonic() < deadline, "the benchmark never started vLLM"
            time.sleep(0.1)
        started = psutil.Process(bench.pid).children(recursive=True)  # EngineCore and the stand-in vLLM
        assert int(pid_file.read_text()) in {p.pid for p in started}
        bench.send_signal(sig)
        _, err = bench.communicate(timeout=EXIT_TIMEOUT_S)
    finally:
        if bench.poll() is None:
            bench.kill()
    assert bench.returncode == 130, err
    assert "enginetui bench throughput: interrupted" in err
    gone, alive = psutil.wait_procs(started, timeout=10)
    assert not alive, [p.pid for p in alive]  # no orphan: neither our EngineCore nor vLLM
