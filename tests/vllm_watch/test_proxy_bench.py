"""The proxy's load test script (tools/proxy_bench.py) on a tiny run (its figures need a quiet machine and the
full run)."""

import json
import subprocess
import sys

from tests.support.checkout import REPO_ROOT


def test_a_tiny_run_measures_both_ways():
    proc = subprocess.run(
        [
            sys.executable,
            "tools/proxy_bench.py",
            "--clients",
            "3",
            "--requests",
            "2",
            "--tokens",
            "4",
            "--token-delay-ms",
            "1",
            "--rounds",
            "1",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    for way in ("direct", "proxied"):
        assert report[way]["requests"] == 6 and report[way]["chunks_per_s"] > 0
        assert 0 < report[way]["p50_first_chunk_ms"] <= report[way]["p50_total_ms"]
    assert report["clients"] == 3 and "added_p50_first_chunk_ms" in report and report["throughput_ratio"] > 0
