"""The /metrics parser and histogram percentiles (Prometheus' histogram_quantile), on hand-made and recorded texts."""

import math

import pytest

from enginetui.vllm_watch import prometheus as m
from enginetui.vllm_watch.prometheus import Histogram, parse_metrics
from tests.fakes import vllm_recorded

TEXT = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 2.0
# TYPE vllm:prompt_tokens counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 100.0
vllm:prompt_tokens_created{engine="0",model_name="m"} 1.7e+09
vllm:prompt_tokens_total{engine="1",model_name="m"} 50.0
# TYPE vllm:request_success counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 4.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 1.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 2.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",model_name="m"} 6.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="1.0",model_name="m"} 10.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 10.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 10.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 3.5
vllm:time_to_first_token_seconds_bucket{engine="1",le="0.1",model_name="m"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="1",le="0.5",model_name="m"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="1",le="1.0",model_name="m"} 2.0
vllm:time_to_first_token_seconds_bucket{engine="1",le="+Inf",model_name="m"} 2.0
vllm:time_to_first_token_seconds_count{engine="1",model_name="m"} 2.0
vllm:time_to_first_token_seconds_sum{engine="1",model_name="m"} 1.5
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="1000",enable_prefix_caching="True"} 1.0
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1.7e+09
"""


def test_gauges_and_counters_by_engine_and_summed():
    s = parse_metrics(TEXT, 5.0)
    assert s.time == 5.0 and s.engines == ["0", "1"]
    assert s.total(m.RUNNING) == 5.0 and s.per_engine(m.RUNNING) == {"0": 3.0, "1": 2.0}
    assert s.total(m.PROMPT_TOKENS) == 150.0  # _created samples are not values
    assert s.total(m.REQUESTS_DONE) == 5.0  # other labels summed within an engine
    assert s.total(m.WAITING) is None  # not reported
    assert s.info[m.CACHE_CONFIG]["block_size"] == "16" and s.process_start == 1.7e9


def test_histogram_quantiles_are_the_buckets_that_hold_them():
    s = parse_metrics(TEXT, 0.0)
    h0 = s.histograms[m.TTFT]["0"]
    assert h0.buckets == ((0.1, 2.0), (0.5, 6.0), (1.0, 10.0), (math.inf, 10.0))
    assert h0.quantile_bucket(0.1) == (0.0, 0.1)  # the 1st of 10 observations is in [0, 0.1]
    assert h0.quantile_bucket(0.2) == (0.0, 0.1)  # the 2nd too
    assert h0.quantile_bucket(0.5) == (0.1, 0.5)  # the 5th
    assert h0.quantile_bucket(0.99) == (0.5, 1.0)  # the 10th
    assert h0.largest_bound() == 1.0  # no observation above 1 s
    both = s.histogram(m.TTFT)  # engines summed
    assert both.count == 12 and both.total == 5.0 and both.buckets[2] == (1.0, 12.0)
    assert both.mean() == pytest.approx(5 / 12)


def test_the_inf_bucket_and_empty_histograms():
    h = Histogram(((1.0, 1.0), (2.0, 1.0), (math.inf, 4.0)), 4.0, 20.0)
    assert h.quantile_bucket(0.9) == (2.0, math.inf)  # beyond the last bound: only "more than 2"
    assert h.largest_bound() == math.inf and h.mean() == 5.0
    empty = Histogram(((1.0, 0.0), (math.inf, 0.0)), 0.0, 0.0)
    assert empty.quantile_bucket(0.5) is None and empty.largest_bound() is None


def test_observations_since_an_earlier_reading_and_after_a_restart():
    early = Histogram(((0.1, 1.0), (1.0, 2.0), (math.inf, 2.0)), 2.0, 0.6)
    late = Histogram(((0.1, 1.0), (1.0, 6.0), (math.inf, 6.0)), 6.0, 3.0)
    recent = late.since(early)
    assert recent.buckets == ((0.1, 0.0), (1.0, 4.0), (math.inf, 4.0)) and recent.count == 4.0
    assert recent.quantile_bucket(0.5) == (0.1, 1.0) and recent.mean() == pytest.approx(0.6)
    restarted = Histogram(((0.1, 1.0), (1.0, 1.0), (math.inf, 1.0)), 1.0, 0.05)
    assert restarted.since(late) is restarted  # counts went down: everything is new


def test_not_prometheus_text_is_an_error():
    with pytest.raises(ValueError):
        parse_metrics("this is { not metrics", 0.0)


def test_the_recorded_real_readings():
    samples = vllm_recorded.samples()
    last = samples[-1]
    assert last.engines == ["0"]
    assert last.info[m.CACHE_CONFIG]["block_size"] == "32" and last.info[m.CACHE_CONFIG]["num_gpu_blocks"] == "64"
    assert last.total(m.GENERATION_TOKENS) > 3000 and last.total(m.PREFIX_HITS) > 0
    assert last.total(m.PREEMPTIONS) >= 1
    assert max(s.total(m.WAITING) for s in samples) >= 1 and max(s.total(m.KV_USAGE) for s in samples) > 0.5
    ttft = last.histogram(m.TTFT)
    assert ttft.count == last.total(m.REQUESTS_DONE)  # one first token per finished request
    p50, p99 = ttft.quantile_bucket(0.5), ttft.quantile_bucket(0.99)
    assert p50[0] <= p99[0] and p50[1] <= p99[1]
    assert ttft.largest_bound() >= ttft.mean() > 0  # the exact mean lies below the highest bucket observed
    reasons = last.split[m.WAITING_BY_REASON]
    assert set(reasons) == {"capacity", "deferred"} and sum(reasons.values()) == last.total(m.WAITING)
    steps = last.histogram(m.ITERATION_TOKENS)
    assert steps.count > 100 and steps.mean() > 1  # tokens per engine step
    assert last.histogram(m.ITL).count > 1000  # one per generated token after the first
