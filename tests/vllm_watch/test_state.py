"""WatchState folding: /metrics readings into rates and percentiles; restarts; KV silence."""

import pytest

from enginetui.vllm_watch import prometheus as m
from enginetui.vllm_watch.kv_events import decode_frames
from enginetui.vllm_watch.panels import latency_text, server_text, why_text
from enginetui.vllm_watch.state import SchedulerLimits, WatchState
from tests.fakes import vllm_recorded
from tests.fakes.vllm_wire import frames, reading, stored


def test_rates_and_series_come_from_counter_deltas():
    state = WatchState("http://h:1", None)
    state.apply_metrics(reading(10.0, gen=100, prompt=50, running=2, queries=40, hits=10))
    state.apply_metrics(reading(12.0, gen=300, prompt=90, running=3, queries=80, hits=40))
    h = state.history
    assert list(h.gen_tok_s) == [100.0] and list(h.prompt_tok_s) == [20.0]
    assert state.hit_rate(recent=True) == pytest.approx(0.75) and state.hit_rate(recent=False) == pytest.approx(0.5)
    assert state.config("block_size") == "16" and state.link == "up"


def test_latency_percentiles_over_the_window_and_since_start():
    state = WatchState("http://h:1", None)
    state.apply_metrics(reading(0.0, 0, 0, ttft=(4, 4, 4)))  # four fast first tokens long ago
    state.apply_metrics(reading(100.0, 0, 0, ttft=(4, 4, 4)))
    state.apply_metrics(reading(101.0, 0, 0, ttft=(4, 8, 8)))  # then four slow ones
    p = state.latency(m.TTFT, "TTFT")
    assert p.window_count == 4 and p.window[0] == (0.1, 1.0)  # only the slow ones: all in (0.1, 1]
    assert p.window_max == 1.0 and p.window_mean == pytest.approx(0.0)  # the sum did not move in this reading
    assert p.count == 8 and p.mean == pytest.approx(1 / 8)
    assert list(state.history.latency_mean["TTFT"])[-1] == pytest.approx(0.0)
    row = latency_text(state, 100).plain.splitlines()[1]
    assert row.split()[:3] == ["TTFT", "0.1–1", "s"]  # a bucket's range, never a value inside it


def test_a_new_process_start_time_is_a_restart_that_empties_the_caches():
    state = WatchState("http://h:1", "ipc:///x")
    state.apply_batch(decode_frames(frames(0, 1.0, [stored([b"a" * 32], None, [1, 2], 2)])))
    state.apply_metrics(reading(1.0, gen=500, prompt=100, start=1.0))
    state.apply_metrics(reading(2.0, gen=10, prompt=5, start=2.0))
    assert state.restarts == 1 and state.caches.ranks[0].num_cached == 0
    assert state.caches.ranks[0].num_stored == 0 and state.caches.ranks[0].num_batches == 0  # its counts from zero
    assert list(state.history.gen_tok_s) == []  # no rate across a restart
    assert state.log[-1].kind == "restart" or any(line.kind == "restart" for line in state.log)


def test_counters_going_down_are_a_restart_too():
    state = WatchState("http://h:1", None)
    state.apply_metrics(reading(1.0, gen=500, prompt=100, done=5, start=1.0))
    state.apply_metrics(reading(2.0, gen=10, prompt=5, done=1, start=1.0))
    assert state.restarts == 1


def test_kv_silence_is_noticed_only_once_a_full_block_must_have_been_cached():
    state = WatchState("http://h:1", "tcp://h:5557")
    state.apply_metrics(reading(1.0, gen=0, prompt=0))
    state.apply_metrics(reading(2.0, gen=4, prompt=8, done=1, prompt_sum=8, gen_sum=4))
    assert not state.kv_events_missing()  # 12 tokens: less than a 16-token block
    state.apply_metrics(reading(3.0, gen=40, prompt=40, done=2, prompt_sum=40, gen_sum=40))
    assert state.kv_events_missing()
    state.apply_batch(decode_frames(frames(0, 1.0, [stored([b"a" * 32], None, [1, 2], 2)])))
    assert not state.kv_events_missing()


def test_the_recorded_session_folds_into_panels():
    state = WatchState("http://127.0.0.1:8000", None)
    for sample in vllm_recorded.samples():
        state.apply_metrics(sample)
    assert state.restarts == 0 and len(state.history.gen_tok_s) == len(vllm_recorded.metrics_texts()) - 1
    assert max(state.history.gen_tok_s) > 0
    server = server_text(state, 100).plain
    assert "of 64 blocks × 32 tok" in server and "requests done" in server and "1 request done" not in server
    latency = latency_text(state, 100).plain.splitlines()
    assert [row.split()[0] for row in latency[1:5]] == ["TTFT", "ITL", "e2e", "queue"]
    why = why_text(state, state.latest, 100).plain
    assert "waiting 0 (capacity 0, deferred 0)" in why and " tok/step · none over " in why
    assert "pass vLLM's --max-num-seqs" in why  # the limits were not given
    state.limits = SchedulerLimits(max_num_seqs=16, max_num_batched_tokens=2048)
    why = why_text(state, state.latest, 100).plain
    assert "running 0 of max 16" in why and "budget 2048 tok" in why and "pass vLLM" not in why
