"""GET /metrics: vLLM's names and labels, fed by the engine's state and request outputs."""

import re

from tests.serve.conftest import engine_idle

LABELS = '{engine="0",model_name="default"}'
NAMES = ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
         "vllm:num_preemptions_total", "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
         "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total", "vllm:time_to_first_token_seconds_count",
         "vllm:inter_token_latency_seconds_count", "vllm:e2e_request_latency_seconds_count")


def scrape(http) -> dict[str, float]:
    r = http.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    values = {}
    for name in NAMES:
        match = re.search(rf"^{re.escape(name)}{re.escape(LABELS)} (\S+)$", r.text, re.M)
        assert match, f"{name}{LABELS} missing from /metrics"
        values[name] = float(match.group(1))
    assert 'vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="default"}' in r.text
    return values


def test_metrics_count_what_requests_did(http):
    engine_idle(http)
    before = scrape(http)
    body = {"prompt": "The function", "max_tokens": 6, "ignore_eos": True}
    for _ in range(2):
        assert http.post("/v1/completions", json=body).status_code == 200
    after = scrape(http)
    grew = {name: after[name] - before[name] for name in NAMES}
    assert grew["vllm:prompt_tokens_total"] == 2 * 3
    assert grew["vllm:generation_tokens_total"] == 2 * 6
    assert grew["vllm:time_to_first_token_seconds_count"] == 2
    assert grew["vllm:e2e_request_latency_seconds_count"] == 2
    assert 2 <= grew["vllm:inter_token_latency_seconds_count"] <= 2 * 5  # one per output after the first
    assert after["vllm:num_requests_running"] == after["vllm:num_requests_waiting"] == 0
    assert after["vllm:kv_cache_usage_perc"] == 0.0
