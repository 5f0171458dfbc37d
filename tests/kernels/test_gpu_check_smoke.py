"""The GPU check script itself, run in its CPU smoke form (tiny shapes, Triton interpreted)."""

import json
import subprocess
import sys

import pytest

from tests.support.checkout import REPO_ROOT

pytestmark = pytest.mark.slow  # a minute of CPU: started first in parallel runs (tests/conftest.py)


def test_gpu_check_cpu_smoke_passes_every_section(tmp_path):
    out = tmp_path / "gpu.json"
    proc = subprocess.run(
        [sys.executable, "tools/gpu_check.py", "--cpu-smoke", "--json", str(out)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "PASS" in proc.stdout.splitlines()[-1]
    report = json.loads(out.read_text())
    sections = {row["section"] for row in report["rows"]}
    assert sections == {
        "attention parity",
        "cache-write parity",
        "e2e greedy parity",
        "e2e sampling",
        "e2e throughput",
        "bandwidth ceiling",
        "decode attention bf16",
        "prefill attention bf16",
    }
    assert all(row["ok"] is not False for row in report["rows"])
    assert report["ok"] is True
    throughput = next(row for row in report["rows"] if row["section"] == "e2e throughput")
    assert throughput["tok_s"] > 0
