"""The proxy's load test harness on a tiny run (its figures need a quiet machine and the full run)."""

import json

from enginetui.vllm_watch import proxy_bench


def test_a_tiny_run_measures_both_ways(capsys):
    assert proxy_bench.main(["--clients", "3", "--requests", "2", "--tokens", "4", "--token-delay-ms", "1",
                             "--rounds", "1"]) == 0
    report = json.loads(capsys.readouterr().out)
    for way in ("direct", "proxied"):
        assert report[way]["requests"] == 6 and report[way]["chunks_per_s"] > 0
        assert 0 < report[way]["p50_first_chunk_ms"] <= report[way]["p50_total_ms"]
    assert report["clients"] == 3 and "added_p50_first_chunk_ms" in report and report["throughput_ratio"] > 0
