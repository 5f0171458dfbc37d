"""The scheduler rebuild: against a server whose truth is known (the simulator, this engine's
scheduler on a fixed clock, standing in for vLLM), and against the recorded real vLLM burst."""

import pytest

from enginetui.core.config import EngineConfig
from enginetui.simulate.simulator import Observer, Simulator
from enginetui.simulate.step_time import StepTimeModel
from enginetui.simulate.workload import SimRequest
from enginetui.vllm_watch.capture import replay_burst
from enginetui.vllm_watch.reconstruct import agreement
from enginetui.vllm_watch.requests import WatchedRequest
from enginetui.vllm_watch.sched_rebuild import RebuildSetup, SchedRebuild
from enginetui.vllm_watch.state import WatchState
from tests.vllm_watch.recorded import FIXTURE

BURST_FIXTURE = FIXTURE.with_name("opt-tiny-burst")  # capture --burst: 64 requests through the proxy
KV_BURST_FIXTURE = FIXTURE.with_name("opt-tiny-burst-kv")  # capture --burst --kv-events --first 300
STEP_S = 0.01  # the stand-in server's step time


class FixedSteps(StepTimeModel):
    name = "fixed"

    def step_seconds(self, shape) -> float:
        return STEP_S


class Truth(Observer):
    """What the stand-in server did: each token's time, its queues after each step, its preemptions."""

    def __init__(self) -> None:
        self.token_times: dict[str, list[float]] = {}
        self.steps: list[tuple[float, int, int, int]] = []  # (end, running, waiting, preemptions so far)
        self.preempted: dict[str, int] = {}
        self.total = 0

    def on_step(self, sched, plan, sampled, start, end) -> None:
        for req_id in sampled:
            self.token_times.setdefault(req_id, []).append(end)
        for req_id in plan.preempted_req_ids:
            self.preempted[req_id] = self.preempted.get(req_id, 0) + 1
        self.total += len(plan.preempted_req_ids)
        self.steps.append((end, len(sched.running), len(sched.waiting), self.total))
        sched.drain_step_record()

    def at(self, when: float) -> tuple[int, int, int]:
        last = (0, 0, 0)
        for end, *state in self.steps:
            if end > when:
                break
            last = tuple(state)
        return last


SETUP = RebuildSetup(num_blocks=24, block_size=16, prefix_caching=False, max_num_seqs=8, max_num_batched_tokens=256,
                     max_model_len=512)


def stand_in_run(num: int = 32) -> tuple[list[SimRequest], Truth]:
    config = EngineConfig(device="cpu", block_size=SETUP.block_size, max_num_seqs=SETUP.max_num_seqs,
                          max_num_batched_tokens=SETUP.max_num_batched_tokens, max_model_len=SETUP.max_model_len,
                          async_scheduling=False)
    workload = [SimRequest(f"p{i + 1}", 1000.0 + 0.002 * i, 20 + 7 * (i % 5), 40 + 11 * (i % 3)) for i in range(num)]
    truth = Truth()
    Simulator(config, SETUP.num_blocks, SETUP.max_model_len, FixedSteps(), truth).run(workload)
    return workload, truth


def seen(r: SimRequest, truth: Truth, by: float = float("inf")) -> WatchedRequest:
    """The request as the proxy saw it by time `by`."""
    view = WatchedRequest(r.request_id, 0, "c", "POST", "/v1/completions", arrival=r.arrival, max_tokens=r.output_len,
                          stream=True)
    times = [t for t in truth.token_times[r.request_id] if t <= by]
    if times:
        view.prompt_tokens, view.token_times, view.status = r.prompt_len, times, "streaming"
    if len(times) == r.output_len:
        view.status, view.finished = "finished", times[-1]
    return view


def test_against_a_server_it_can_match_it_agrees_on_every_reading_and_each_preemption():
    workload, truth = stand_in_run()
    assert truth.total > 0  # the pool is small enough to preempt
    rebuild = SchedRebuild(SETUP)
    views = [seen(r, truth) for r in workload]
    for view in views:
        rebuild.track(view)
    end = truth.steps[-1][0]
    t = truth.steps[0][0]  # from the first step on (the stand-in has no gauges before it)
    while t < end + 0.1:
        running, waiting, preempted = truth.at(t)
        rebuild.reading(t, running, waiting, preempted)
        t += 0.013
    rebuild.advance()
    agree, total = agreement(rebuild.checks)
    assert total > 100 and agree == total
    assert all(c.rebuilt_running == c.running and c.rebuilt_waiting == c.waiting for c in rebuild.checks)
    assert rebuild.num_preemptions == truth.total
    assert {v.req_id: v.rebuilt_preemptions for v in views if v.rebuilt_preemptions} == truth.preempted


def test_it_follows_the_wire_as_far_as_it_goes_and_waits_there():
    workload, truth = stand_in_run(12)
    cut = truth.steps[len(truth.steps) // 2][0]  # halfway through the traffic
    rebuild = SchedRebuild(SETUP)
    for r in workload:
        rebuild.track(seen(r, truth, by=cut))
    early = truth.steps[2][0] + 0.001
    rebuild.reading(early, *truth.at(early))
    rebuild.reading(cut + 0.05, *truth.at(cut + 0.05))
    rebuild.advance()
    assert rebuild.steps and early < rebuild.steps[-1].time <= cut  # no step past the last token seen
    assert [c.time for c in rebuild.checks] == [early]  # the later reading waits for the rebuild
    assert rebuild.checks[0].agrees
    for r in workload:  # the rest of the traffic goes by: the rebuild catches up
        view = rebuild.entered.get(r.request_id) or next(v for v in rebuild.views if v.req_id == r.request_id)
        full = seen(r, truth)
        view.prompt_tokens, view.token_times, view.status, view.finished = (full.prompt_tokens, full.token_times,
                                                                            full.status, full.finished)
    rebuild.advance()
    assert [c.time for c in rebuild.checks] == [early, cut + 0.05] and all(c.agrees for c in rebuild.checks)


def test_the_watcher_starts_the_rebuild_once_the_pool_and_the_limits_are_known():
    from tests.vllm_watch.test_state import reading

    state = WatchState("http://h:1", None)
    state.apply_metrics(reading(1.0, 0, 0))
    assert state.rebuild is None  # no limits given: nothing to rebuild with


def burst_state() -> WatchState:
    """The recorded burst replayed into a watcher given the limits vLLM was started with."""
    return replay_burst(BURST_FIXTURE)


@pytest.mark.skipif(not (BURST_FIXTURE / "burst.etrec.xz").exists(), reason="no recorded burst")
def test_the_rebuild_agrees_with_a_recorded_real_vllm_burst():
    state = burst_state()
    rebuild = state.rebuild
    agree, total = agreement(rebuild.checks)
    print(f"agrees ±1 on {agree}/{total}; preemptions rebuilt {rebuild.num_preemptions}, "
          f"vLLM {rebuild.checks[-1].preemptions}")
    # measured: 35 of 42 readings (83%; the target, 95%, is not reached yet); preemptions 78 rebuilt
    # against vLLM's 76
    assert total >= 40 and agree >= 35
    assert abs(rebuild.num_preemptions - rebuild.checks[-1].preemptions) <= 2
    # the KV blocks held (vLLM's kv_cache_usage_perc of its pool): measured within ±1 on 30 of 42 readings
    blocks = [c.blocks_agree for c in rebuild.checks]
    assert None not in blocks and sum(blocks) >= 30


def test_the_rebuilds_cached_blocks_agree_with_vllms_kv_events():
    """A burst captured with vLLM's KV events heard: the blocks the rebuild has cached against the
    blocks the events show cached, at every reading with traffic."""
    rebuild = replay_burst(KV_BURST_FIXTURE).rebuild
    cached = [c.cached_agree for c in rebuild.checks if c.cached_agree is not None]
    agree, total = agreement(rebuild.checks)
    # measured (2026-12-02, Intel Xeon): cached blocks ±1 on 86 of the 94 readings after the first KV
    # batch, queues on 84 of 95 readings; preemptions 79 rebuilt against vLLM's 79
    assert total >= 90 and len(cached) >= total - 1
    assert sum(cached) >= 86 and agree >= 84
    assert abs(rebuild.num_preemptions - rebuild.checks[-1].preemptions) <= 2
