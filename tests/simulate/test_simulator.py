"""The simulator on hand-checkable runs: forced output lengths through the scheduler's own stop
check, the clock, idle gaps, preemption, prefix caching, and the figures computed from them."""

import math

import pytest

from enginetui.core.config import EngineConfig
from enginetui.latency_figures import parse_slos
from enginetui.simulate.simulator import Observer, Simulator
from enginetui.simulate.step_time import StepTimeModel
from enginetui.simulate.summary import summarize
from enginetui.simulate.workload import SimRequest, random_workload, shared_prefix_workload


class TenMs(StepTimeModel):
    """Every step takes 10 ms."""

    name = "10 ms"

    def step_seconds(self, shape) -> float:
        return 0.01


class Checks(Observer):
    """Checks the scheduler's invariants after every step; counts what the steps did."""

    def __init__(self) -> None:
        self.steps = 0
        self.preempted = 0

    def on_step(self, sched, plan, sampled, start, end) -> None:
        sched.check_invariants()
        self.steps += 1
        self.preempted += len(sched.drain_step_record().preempted)


def test_one_request_hand_timed():
    run = Simulator(EngineConfig(device="cpu"), 64, 512, TenMs()).run([SimRequest("r", 0.5, 10, 3)])
    t = run.times
    assert (t.first_token[0], t.finish[0], t.num_output[0]) == (pytest.approx(0.51), pytest.approx(0.53), 3)
    assert list(t.itl) == pytest.approx([0.01, 0.01])
    m = summarize(run, parse_slos("ttft:10.01 tpot:9"))
    assert (m.ttft.p50, m.tpot.p50, m.e2e.p50) == (pytest.approx(10), pytest.approx(10), pytest.approx(30))
    assert m.goodput == 0.0  # tpot 10 ms > 9 ms
    assert summarize(run, parse_slos("ttft:10.01,tpot:10.01")).goodput == pytest.approx(1 / 0.03)


def test_the_clock_waits_for_arrivals_and_chunks_follow_the_budget():
    config = EngineConfig(device="cpu", max_num_batched_tokens=16)
    requests = [SimRequest("a", 0.0, 40, 2), SimRequest("b", 5.0, 8, 1)]
    run = Simulator(config, 64, 512, TenMs()).run(requests)
    # a: 40 prompt tokens in chunks of 16, 16, 8 (the last samples), then one decode
    assert run.times.first_token[0] == pytest.approx(0.03) and run.times.finish[0] == pytest.approx(0.04)
    # idle until b arrives at 5 s; its whole prompt fits one step
    assert run.times.first_token[1] == pytest.approx(5.01) and run.times.finish[1] == pytest.approx(5.01)
    assert list(run.timeline.num_prefill_tokens) == [16, 16, 8, 0, 8]


def test_every_request_generates_its_output_length_exactly_through_preemptions():
    config = EngineConfig(device="cpu", max_num_batched_tokens=64, max_num_seqs=16, block_size=16)
    workload = random_workload(60, 100, 80, 0.9, seed=3)
    checks = Checks()
    run = Simulator(config, 40, 1024, TenMs(), checks).run(workload)
    assert checks.preempted > 0 and checks.steps == len(run.timeline.end)
    assert [run.times.num_output[k] for k in range(60)] == [r.output_len for r in run.requests]
    assert all(not math.isnan(f) for f in run.times.finish)
    assert sum(run.times.num_preemptions) == checks.preempted == sum(run.timeline.num_preempted)
    assert max(run.timeline.kv_used_blocks) <= 40


def test_prefix_caching_serves_shared_prefixes_from_the_cache():
    workload = shared_prefix_workload(20, 2, 256, 32, 8, 0.0, seed=0, vocab_size=1000)
    prefill = {}
    for caching in (False, True):
        config = EngineConfig(device="cpu", enable_prefix_caching=caching, max_num_seqs=4)
        run = Simulator(config, 400, 1024, TenMs()).run(
            [SimRequest(**{f: getattr(r, f) for f in r.__slots__}) for r in workload]
        )
        prefill[caching] = sum(run.timeline.num_prefill_tokens)
    assert prefill[False] == 20 * (256 + 32)
    assert prefill[True] <= 20 * 32 + 2 * 256 + 20 * 16  # each prefix computed about once


def test_requests_that_can_never_fit_are_rejected_by_the_scheduler():
    run = Simulator(EngineConfig(device="cpu"), 4, 512, TenMs()).run(
        [SimRequest("big", 0.0, 100, 10), SimRequest("ok", 0.0, 20, 5)]
    )
    assert run.num_rejected == 1 and math.isnan(run.times.finish[0]) and run.times.num_output[1] == 5
    assert run.first_rejection == "needs 7 KV blocks for 109 tokens (prompt + max_tokens - 1) but the whole pool has 4"
    summary = summarize(run)
    assert summary.num_completed == 1 and summary.first_rejection == run.first_rejection
