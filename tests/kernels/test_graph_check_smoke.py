"""The CUDA-graph check script in its CPU smoke form (a tiny model, graphs replayed by EagerReplay), and the
session script that runs it on a GPU."""

import json
import subprocess
import sys

import pytest

from tests.support.checkout import REPO_ROOT


@pytest.mark.slow  # an engine start and a dozen profiled steps: seconds of CPU
def test_graph_check_cpu_smoke_passes(tmp_path):
    out = tmp_path / "graphs.json"
    proc = subprocess.run(
        [sys.executable, "tools/graph_check.py", "--cpu-smoke", "--json", str(out)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(out.read_text())
    rows = {row["case"]: row for row in report["rows"]}
    assert report["ok"] is True and all(row["ok"] is not False for row in report["rows"])
    capture = rows["opt-tiny fp32, EagerReplay: capture"]
    assert capture["sizes"] == [1, 2, 4, 8] and capture["capture_s"] > 0
    assert rows["opt-tiny fp32, EagerReplay: greedy parity"]["ok"] is True
    steps = [row for row in report["rows"] if row["section"] == "decode step"]
    assert len(steps) == 2 and all(row["graphs_ms"] > 0 and row["eager_ms"] > 0 for row in steps)


def test_gpu_session_script_parses_and_refuses_an_unknown_part(tmp_path):
    script = REPO_ROOT / "kernels" / "gpu_session.sh"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    proc = subprocess.run(
        ["bash", str(script), str(tmp_path), "nonsense"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "PYTHON": "true"},
    )
    assert proc.returncode == 2 and "unknown part nonsense: kernels or graphs" in proc.stderr
