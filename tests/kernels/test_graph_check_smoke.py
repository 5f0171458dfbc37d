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
    parity = [row for row in report["rows"] if row["section"] == "transformers"]
    assert len(parity) == 5 and all(row["ok"] is True and row["matched"] == 6 for row in parity)
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
    assert proc.returncode == 2 and "unknown part nonsense: usage: kernels/gpu_session.sh" in proc.stderr


@pytest.mark.slow  # two engines on CPU (a scaled-down Llama-3.1-8B config, the dashboard's): half a minute
def test_gpu_session_dry_run_runs_its_parts_on_cpu(tmp_path):
    """The session script's CPU form: the Llama-3.1-8B config scaled down through graphs, transformers parity
    and decode timing, and the dashboard in a pseudo-terminal with its screen saved; the summary at the end."""
    out, home = tmp_path / "out", tmp_path / "home"
    proc = subprocess.run(
        ["bash", "kernels/gpu_session.sh", str(out), "--dry-run", "llama", "dashboard"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable, "HOME": str(home)},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((out / "llama-3.1-8b.json").read_text())
    parity = [row for row in report["rows"] if row["section"] == "transformers"]
    assert report["ok"] is True and len(parity) == 3 and all(row["matched"] == 5 for row in parity)
    assert "Requests" in (out / "dashboard.svg").read_text()
    assert sorted(p.name for p in out.iterdir()) == [
        "dashboard.svg",
        "dashboard_engine.log",
        "llama-3.1-8b.json",
        "machine.txt",
        "session.log",
    ]
    assert proc.stdout.rstrip().endswith("gpu_session llama dashboard: exit 0")
