"""GET /metrics: vLLM's names, labels and buckets (checked against a captured vLLM 0.32 /metrics),
fed by the engine's state, request outputs and the engine's per-step outputs."""

import json
import lzma
import re
import time

from prometheus_client.parser import text_string_to_metric_families

from enginetui.core.models.default_model import DEFAULT_MODEL_DIR
from tests.serve.serving import engine_idle
from tests.support.checkout import REPO_ROOT

LABELS = f'{{engine="0",model_name="{DEFAULT_MODEL_DIR}"}}'  # the served name: the embedded model's path
NAMES = (
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:num_preemptions_total",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
    "vllm:time_to_first_token_seconds_count",
    "vllm:inter_token_latency_seconds_count",
    "vllm:e2e_request_latency_seconds_count",
    "vllm:request_queue_time_seconds_count",
    "vllm:request_prompt_tokens_count",
    "vllm:request_prompt_tokens_sum",
    "vllm:request_generation_tokens_count",
    "vllm:request_generation_tokens_sum",
    "vllm:iteration_tokens_total_count",
    "vllm:iteration_tokens_total_sum",
    "vllm:request_num_preemptions_count",
)
# A /metrics reading of vLLM 0.32 serving opt-tiny with max_model_len 512, as the shared test server has.
VLLM_METRICS = REPO_ROOT / "tests" / "vllm_watch" / "fixtures" / "opt-tiny" / "metrics.jsonl.xz"
SERIES = (
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:num_requests_waiting_by_reason",
    "vllm:kv_cache_usage_perc",
    "vllm:num_preemptions",
    "vllm:prompt_tokens",
    "vllm:generation_tokens",
    "vllm:prefix_cache_queries",
    "vllm:prefix_cache_hits",
    "vllm:request_success",
    "vllm:request_prompt_tokens",
    "vllm:request_generation_tokens",
    "vllm:iteration_tokens_total",
    "vllm:time_to_first_token_seconds",
    "vllm:inter_token_latency_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:request_queue_time_seconds",
    "vllm:request_num_preemptions",
    "vllm:cache_config_info",
)  # every vllm: family this server publishes


def families(text: str) -> dict[str, dict]:
    """Per vllm: family: its type, sample names, label names, and (histograms) bucket bounds; label
    values too, except the model's name."""
    out = {}
    for fam in text_string_to_metric_families(text):
        if not fam.name.startswith("vllm:"):
            continue
        out[fam.name] = {
            "type": fam.type,
            "samples": sorted({s.name for s in fam.samples}),
            "labels": sorted({k for s in fam.samples for k in s.labels}),
            "values": sorted(
                {
                    (k, v)
                    for s in fam.samples
                    for k, v in s.labels.items()
                    if k not in ("model_name", "le") and fam.name != "vllm:cache_config_info"
                }
            ),
            "le": sorted({float(s.labels["le"]) for s in fam.samples if "le" in s.labels}),
        }
    return out


def scrape(http) -> dict[str, float]:
    r = http.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    values = {}
    for name in NAMES:
        match = re.search(rf"^{re.escape(name)}{re.escape(LABELS)} (\S+)$", r.text, re.M)
        assert match, f"{name}{LABELS} missing from /metrics"
        values[name] = float(match.group(1))
    for reason in ("stop", "length", "abort"):
        labels = f'{{engine="0",finished_reason="{reason}",model_name="{DEFAULT_MODEL_DIR}"}}'
        match = re.search(rf"^vllm:request_success_total{re.escape(labels)} (\S+)$", r.text, re.M)
        assert match, f"request_success_total for {reason} missing"
        values[f"success:{reason}"] = float(match.group(1))
    return values


def test_every_series_has_vllms_name_type_labels_and_buckets(http):
    lines = lzma.decompress(VLLM_METRICS.read_bytes()).decode().splitlines()
    theirs = families(json.loads(lines[-1])["text"])
    ours = families(http.get("/metrics").text)
    assert set(SERIES) <= set(ours) and set(ours) <= set(theirs), set(ours) - set(theirs)
    assert {name.removesuffix("_created") for name in ours} == set(SERIES)  # and their `_created`, as vLLM's
    for name in ours:
        assert ours[name] == theirs[name], name
    info = re.search(r"^vllm:cache_config_info\{(.*)\} 1\.0$", http.get("/metrics").text, re.M).group(1)
    assert 'block_size="16"' in info and 'num_gpu_blocks="24"' in info and 'num_gpu_blocks_override="24"' in info


def test_metrics_count_what_requests_did(http):
    engine_idle(http)
    before = scrape(http)
    body = {"prompt": "The function", "max_tokens": 6, "ignore_eos": True}
    for _ in range(2):
        assert http.post("/v1/completions", json=body).status_code == 200
    deadline = time.monotonic() + 30
    while True:  # the answers are complete; the last outputs may still be on their way to the metrics
        after = scrape(http)
        if after["vllm:request_num_preemptions_count"] - before["vllm:request_num_preemptions_count"] == 2:
            break
        assert time.monotonic() < deadline, "the step events of the two requests were not counted"
        time.sleep(0.05)
    grew = {name: after[name] - before[name] for name in after}
    assert grew["vllm:prompt_tokens_total"] == 2 * 3
    assert grew["vllm:generation_tokens_total"] == 2 * 6
    assert grew["vllm:time_to_first_token_seconds_count"] == 2
    assert grew["vllm:e2e_request_latency_seconds_count"] == 2
    assert grew["vllm:request_queue_time_seconds_count"] == 2
    assert 2 <= grew["vllm:inter_token_latency_seconds_count"] <= 2 * 5  # one per output after the first
    assert grew["success:length"] == 2 and grew["success:stop"] == grew["success:abort"] == 0
    assert grew["vllm:request_prompt_tokens_count"] == 2 and grew["vllm:request_prompt_tokens_sum"] == 2 * 3
    assert grew["vllm:request_generation_tokens_count"] == 2 and grew["vllm:request_generation_tokens_sum"] == 2 * 6
    assert grew["vllm:iteration_tokens_total_sum"] == 2 * 3 + 2 * 6 - 2  # every token computed (the last is not fed)
    assert after["vllm:num_requests_running"] == after["vllm:num_requests_waiting"] == 0
    assert after["vllm:kv_cache_usage_perc"] == 0.0


def test_our_own_vllm_watcher_reads_it_as_it_reads_vllms(http):
    """`enginetui attach --vllm` parses this server's /metrics: the pool from cache_config_info and
    the histograms it draws latency from."""
    from enginetui.vllm_watch.prometheus import CACHE_CONFIG, parse_metrics

    sample = parse_metrics(http.get("/metrics").text, time.time())
    assert sample.info[CACHE_CONFIG]["block_size"] == "16" and sample.info[CACHE_CONFIG]["num_gpu_blocks"] == "24"
    for name in ("vllm:request_queue_time_seconds", "vllm:time_to_first_token_seconds", "vllm:iteration_tokens_total"):
        assert sample.histogram(name) is not None, name
    assert sample.engines == ["0"]


def test_a_stream_interval_counts_an_inter_token_latency_per_token_not_per_chunk(http):
    engine_idle(http)
    before = scrape(http)
    body = {"prompt": "The function", "max_tokens": 11, "ignore_eos": True, "stream": True, "stream_interval": 4}
    r = http.post("/v1/completions", json=body)
    assert r.status_code == 200 and r.text.count('"text"') == 4  # chunks of 1, 4, 4 and 2 tokens
    grew = scrape(http)["vllm:inter_token_latency_seconds_count"] - before["vllm:inter_token_latency_seconds_count"]
    assert grew == 10  # every token after the first, as vLLM counts them
