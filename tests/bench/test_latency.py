"""`bench latency`: seeded Poisson arrivals, latency statistics, and a streaming run on the tiny model."""

import json
import math

import pytest

from enginetui.bench.latency import RequestTiming, summarize
from enginetui.latency_figures import Latency
from enginetui.simulate.workload import SimRequest
from tests.bench.small_runs import SMALL_WORKLOAD, bench_args


def test_ttft_tpot_itl_and_e2e_come_from_the_client_timings():
    workload = [SimRequest("a", 0.0, 2, 3), SimRequest("b", 0.0, 1, 1)]
    timings = [
        RequestTiming(sent=0.0, token_times=[0.1, 0.3, 0.4], num_output_tokens=3, done=0.4),
        RequestTiming(sent=0.2, token_times=[0.5], num_output_tokens=1, done=0.5),
    ]
    result = summarize("enginetui", "none", workload, timings, duration=0.5)
    assert result.ttft_ms.mean == pytest.approx(200.0) and result.ttft_ms.count == 2  # 100 and 300 ms
    assert result.tpot_ms.mean == pytest.approx(150.0) and result.tpot_ms.count == 1  # (0.4 - 0.1) / 2
    assert result.itl_ms.p50 == pytest.approx(150.0) and result.itl_ms.count == 2  # 200 and 100 ms
    assert result.e2e_ms.p50 == pytest.approx(350.0)  # 400 and 300 ms
    assert result.requests_per_s == 4.0 and result.output_tokens_per_s == 8.0 and result.total_tokens_per_s == 14.0
    assert (
        result.label == "enginetui" and summarize("vllm-all", "busy", workload, timings, 0.5).label == "vllm-all+busy"
    )
    with pytest.raises(RuntimeError, match="generated 4 tokens"):
        summarize("enginetui", "none", [SimRequest("a", 0.0, 1, 5)] * 2, timings, 0.5)


def test_empty_distribution_is_nan_not_an_error():
    d = Latency.of([])
    assert d.count == 0 and math.isnan(d.p50)


def test_streaming_run_on_the_tiny_model(tiny_opt_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("ENGINETUI_MULTIPROC", "0")
    path = tmp_path / "latency.json"
    args = bench_args("latency", tiny_opt_dir, *SMALL_WORKLOAD, "--request-rate", "50", "--json", str(path))
    assert args.func(args) == 0
    data = json.loads(path.read_text())
    ours = data["runs"][0]
    assert data["request_rate"] == 50.0 and ours["ttft_ms"]["count"] == 5 and ours["e2e_ms"]["count"] == 5
    assert ours["itl_ms"]["count"] == data["output_tokens"] - 5  # one gap per token after the first
    assert ours["ttft_ms"]["p50"] <= ours["e2e_ms"]["p50"] and len(data["runs"]) == 1
