"""The scheduler rebuild: against a server whose truth is known (the simulator, this engine's
scheduler on a fixed clock, standing in for vLLM), and against the recorded real vLLM burst."""

from enginetui.core.config import EngineConfig
from enginetui.simulate.simulator import Observer, Simulator
from enginetui.simulate.step_time import StepTimeModel
from enginetui.simulate.workload import SimRequest
from enginetui.vllm_watch.burst import matching_steps, replay_burst, vllm_logged_steps
from enginetui.vllm_watch.reconstruct import agreement
from enginetui.vllm_watch.requests import WatchedRequest
from enginetui.vllm_watch.sched_rebuild import RebuildSetup, SchedRebuild
from enginetui.vllm_watch.state import WatchState
from tests.fakes.vllm_recorded import FIXTURE

BURST_FIXTURE = FIXTURE.with_name("opt-tiny-burst")  # capture --burst: 64 requests through the proxy
KV_BURST_FIXTURE = FIXTURE.with_name("opt-tiny-burst-kv")  # capture --burst --kv-events --first 300
STEPS_FIXTURE = FIXTURE.with_name("opt-tiny-burst-steps")  # capture --burst, with vLLM's line per step
STEP_S = 0.01  # the stand-in server's step time


class FixedSteps(StepTimeModel):
    name = "fixed"

    def step_seconds(self, shape) -> float:
        return STEP_S


class Truth(Observer):
    """What the stand-in server did: each token's time, its queues after each step, its preemptions,
    its steps that sampled a token (vLLM's iteration_tokens_total count)."""

    def __init__(self) -> None:
        self.token_times: dict[str, list[float]] = {}
        self.steps: list[tuple[float, int, int, int]] = []  # (end, running, waiting, preemptions so far)
        self.output_steps: list[int] = []  # steps with a sampled token so far, after each step
        self.scheduled: list[tuple[int, int]] = []  # (requests, tokens) each step computed
        self.preempted: dict[str, int] = {}
        self.total = 0

    def on_step(self, sched, plan, sampled, start, end) -> None:
        for req_id in sampled:
            self.token_times.setdefault(req_id, []).append(end)
        for req_id in plan.preempted_req_ids:
            self.preempted[req_id] = self.preempted.get(req_id, 0) + 1
        self.total += len(plan.preempted_req_ids)
        self.steps.append((end, len(sched.running), len(sched.waiting), self.total))
        self.output_steps.append((self.output_steps[-1] if self.output_steps else 0) + bool(sampled))
        self.scheduled.append((len(plan.num_scheduled_tokens), plan.total_num_scheduled_tokens))
        sched.drain_step_record()

    def steps_at(self, when: float) -> int:
        """Steps with a sampled token by `when`."""
        done = [n for (end, *_), n in zip(self.steps, self.output_steps) if end <= when]
        return done[-1] if done else 0

    def at(self, when: float) -> tuple[int, int, int]:
        last = (0, 0, 0)
        for end, *state in self.steps:
            if end > when:
                break
            last = tuple(state)
        return last


SETUP = RebuildSetup(
    num_blocks=24, block_size=16, prefix_caching=False, max_num_seqs=8, max_num_batched_tokens=256, max_model_len=512
)


def stand_in_run(num: int = 32, arrivals: list[float] | None = None) -> tuple[list[SimRequest], Truth]:
    """The stand-in server's run of `num` requests, reaching it at `arrivals` (default: 2 ms apart)."""
    config = EngineConfig(
        device="cpu",
        block_size=SETUP.block_size,
        max_num_seqs=SETUP.max_num_seqs,
        max_num_batched_tokens=SETUP.max_num_batched_tokens,
        max_model_len=SETUP.max_model_len,
        async_scheduling=False,
    )
    arrivals = arrivals or [1000.0 + 0.002 * i for i in range(num)]
    workload = [SimRequest(f"p{i + 1}", arrivals[i], 20 + 7 * (i % 5), 40 + 11 * (i % 3)) for i in range(num)]
    truth = Truth()
    Simulator(config, SETUP.num_blocks, SETUP.max_model_len, FixedSteps(), truth).run(workload)
    return workload, truth


def seen(
    r: SimRequest, truth: Truth, by: float = float("inf"), arrival: float | None = None, responded: float | None = None
) -> WatchedRequest:
    """The request as the proxy saw it by time `by`: having reached the proxy at `arrival`, its response's
    status line at `responded` (both by default when it reached the server)."""
    view = WatchedRequest(
        r.request_id,
        0,
        "c",
        "POST",
        "/v1/completions",
        arrival=r.arrival if arrival is None else arrival,
        max_tokens=r.output_len,
        stream=True,
    )
    view.respond(200, r.arrival if responded is None else responded)
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
        view.prompt_tokens, view.token_times, view.status, view.finished = (
            full.prompt_tokens,
            full.token_times,
            full.status,
            full.finished,
        )
    rebuild.advance()
    assert [c.time for c in rebuild.checks] == [early, cut + 0.05] and all(c.agrees for c in rebuild.checks)


def replay_stand_in(
    workload: list[SimRequest],
    truth: Truth,
    proxy_arrivals: list[float] | None = None,
    reading_lag: float = 0.0,
    early_status: bool = False,
) -> SchedRebuild:
    """The rebuild of the stand-in's run, read once before it and every 13 ms from its first step on: each
    reading with the state and the step count at its instant, reported `reading_lag` seconds later (as a
    reading slow to come back); the requests reached the proxy at `proxy_arrivals` (default: when they
    reached the server), in that order, and their status lines went by when the server took them in
    (`early_status`: as soon as they reached the proxy)."""
    rebuild = SchedRebuild(SETUP)
    proxy_arrivals = proxy_arrivals or [r.arrival for r in workload]
    views = [
        seen(r, truth, arrival=proxy_arrivals[i], responded=proxy_arrivals[i] if early_status else None)
        for i, r in enumerate(workload)
    ]
    for view in sorted(views, key=lambda v: v.arrival):
        rebuild.track(view)
    rebuild.reading(workload[0].arrival - 1.0, 0, 0, 0, steps=0)
    t, end = truth.steps[0][0], truth.steps[-1][0]
    while t < end + 0.1:
        running, waiting, preempted = truth.at(t)
        rebuild.reading(t + reading_lag, running, waiting, preempted, steps=truth.steps_at(t))
        t += 0.013
    rebuild.advance()
    return rebuild


def test_a_reading_is_placed_by_vllms_step_count_not_by_when_it_came_back():
    workload, truth = stand_in_run()
    rebuild = replay_stand_in(workload, truth, reading_lag=0.035)  # 3.5 steps late
    agree, total = agreement(rebuild.checks)
    assert total > 100 and agree == total
    assert all(c.rebuilt_running == c.running and c.rebuilt_waiting == c.waiting for c in rebuild.checks)
    # placed by when they came back instead, the same readings disagree
    late = SchedRebuild(SETUP)
    for r in workload:
        late.track(seen(r, truth))
    for c in rebuild.checks:
        late.reading(c.time, c.running, c.waiting, c.preemptions)
    late.advance()
    assert agreement(late.checks)[0] < total * 0.9


def test_the_step_count_is_anchored_again_after_each_idle_spell():
    first, truth_a = stand_in_run(12)
    later = [1010.0 + 0.002 * i for i in range(12)]
    second, truth_b = stand_in_run(12, later)
    rebuild = SchedRebuild(SETUP)
    for r in first:
        rebuild.track(seen(r, truth_a))
    for r in second:
        view = seen(r, truth_b)
        view.req_id = f"q{r.request_id}"  # other requests than the first spell's
        rebuild.track(view)
    # vLLM made 5 steps with outputs the rebuild did not (served another client in between, say)
    counted = truth_a.output_steps[-1] + 5
    for t in (truth_a.steps[0][0] - 0.5, *(s[0] for s in truth_a.steps[::7])):
        rebuild.reading(t, *truth_a.at(t), steps=truth_a.steps_at(t))
    rebuild.reading(1005.0, 0, 0, truth_a.total, steps=counted)  # idle between the spells
    for end, *_ in truth_b.steps[::7]:
        rebuild.reading(
            end, *truth_b.at(end)[:2], truth_a.total + truth_b.at(end)[2], steps=counted + truth_b.steps_at(end)
        )
    rebuild.advance()
    agree, total = agreement(rebuild.checks)
    assert total > 20 and agree == total


def stand_in_with_ties() -> tuple[list[SimRequest], Truth, list[float]]:
    """32 requests reaching the server 0.1 ms apart, the proxy in the opposite order: those admitted in
    one step tie on the wire, and the rebuild's order of them is not the server's."""
    arrivals = [1000.0 + 0.0001 * i for i in range(32)]
    workload, truth = stand_in_run(32, arrivals)
    return workload, truth, arrivals[::-1]


def test_whom_vllm_preempted_among_requests_admitted_together_comes_from_the_wire(monkeypatch):
    workload, truth, proxy = stand_in_with_ties()
    assert truth.total > 0
    rebuild = replay_stand_in(workload, truth, proxy)
    assert agreement(rebuild.checks)[0] == len(rebuild.checks)
    assert {
        v.req_id: v.rebuilt_preemptions for v in rebuild.entered.values() if v.rebuilt_preemptions
    } == truth.preempted
    monkeypatch.setattr(SchedRebuild, "_order_victims", lambda self: True)  # the scheduler's order of the ties
    blind = replay_stand_in(workload, truth, proxy)
    assert {v.req_id: v.rebuilt_preemptions for v in blind.entered.values() if v.rebuilt_preemptions} != truth.preempted


BURST_OVER_STEPS = [1000.0] + [1000.012] * 7 + [1000.022] * 8  # reaching the server over three steps


def test_requests_enter_when_their_status_line_shows_the_server_took_them_in(monkeypatch):
    # the server got the burst over three steps (its API server handing requests over a few at a time);
    # the proxy saw every request at once, and each status line when the server took the request in
    monkeypatch.setattr(SchedRebuild, "_admitted_later", lambda self: [])  # the status lines alone
    workload, truth = stand_in_run(16, BURST_OVER_STEPS)
    rebuild = replay_stand_in(workload, truth, [1000.0] * 16)
    assert [(s.scheduled_requests, s.scheduled_tokens) for s in rebuild.steps] == truth.scheduled
    assert agreement(rebuild.checks)[0] == len(rebuild.checks)
    blind = SchedRebuild(SETUP)  # taken in when they reached the proxy: every one at the first step
    for r in workload:
        blind.track(seen(r, truth, arrival=1000.0, responded=1000.0))
    blind.reading(999.0, 0, 0, 0, steps=0)
    blind.advance()
    assert [(s.scheduled_requests, s.scheduled_tokens) for s in blind.steps] != truth.scheduled


def test_requests_the_server_took_in_later_than_the_proxy_are_admitted_when_the_wire_shows(monkeypatch):
    # as above, but the status lines went by at once (vLLM's API server starts a response before it hands
    # the request to its engine, and under load well before): the tokens show when each was admitted
    arrivals = BURST_OVER_STEPS
    workload, truth = stand_in_run(16, arrivals)
    proxy = [1000.0] * 16
    assert truth.scheduled[1][0] == 1 and truth.scheduled[2][0] == 8  # step 1 ran p1 alone; step 2 took in 7
    rebuild = replay_stand_in(workload, truth, proxy, early_status=True)
    assert [(s.scheduled_requests, s.scheduled_tokens) for s in rebuild.steps] == truth.scheduled
    # vLLM's gauges do not count a request its API server has not handed to its engine yet; the rebuild
    # counts it waiting from when its status line went by (here, as it reached the proxy): so the readings
    # agree from the first step that had every request in (the server takes in new requests between steps)
    taken_in = [c for c in rebuild.checks if c.time >= truth.steps[3][0]]
    assert len(taken_in) > 100 and agreement(taken_in)[0] == len(taken_in)
    monkeypatch.setattr(SchedRebuild, "_admitted_later", lambda self: [])  # whoever reached the proxy
    blind = replay_stand_in(workload, truth, proxy, early_status=True)
    assert [(s.scheduled_requests, s.scheduled_tokens) for s in blind.steps] != truth.scheduled


def test_the_watcher_starts_the_rebuild_once_the_pool_and_the_limits_are_known():
    from tests.fakes.vllm_wire import reading

    state = WatchState("http://h:1", None)
    state.apply_metrics(reading(1.0, 0, 0))
    assert state.rebuild is None  # no limits given: nothing to rebuild with


def burst_state() -> WatchState:
    """The recorded burst replayed into a watcher given the limits vLLM was started with."""
    return replay_burst(BURST_FIXTURE)


def test_the_rebuild_agrees_with_a_recorded_real_vllm_burst():
    state = burst_state()
    rebuild = state.rebuild
    agree, total = agreement(rebuild.checks)
    print(
        f"agrees ±1 on {agree}/{total}; preemptions rebuilt {rebuild.num_preemptions}, "
        f"vLLM {rebuild.checks[-1].preemptions}"
    )
    # measured: 33 of 43 readings (77%); preemptions 78 rebuilt against vLLM's 76. The hardest capture:
    # taken on a 2-core machine so loaded that the wire carried a step's tokens over 40-180 ms (steps took
    # 10), so whom vLLM preempted and took in is not always to be told from it
    assert total >= 40 and agree >= 33
    assert abs(rebuild.num_preemptions - rebuild.checks[-1].preemptions) <= 2
    # the KV blocks held (vLLM's kv_cache_usage_perc of its pool): measured within ±1 on 34 of 43 readings
    blocks = [c.blocks_agree for c in rebuild.checks]
    assert None not in blocks and sum(blocks) >= 34


def test_the_rebuilds_cached_blocks_agree_with_vllms_kv_events():
    """A burst captured with vLLM's KV events heard: the blocks the rebuild has cached against the
    blocks the events show cached, at every reading with traffic."""
    rebuild = replay_burst(KV_BURST_FIXTURE).rebuild
    cached = [c.cached_agree for c in rebuild.checks if c.cached_agree is not None]
    agree, total = agreement(rebuild.checks)
    # captured 2026-12-02 on an Intel Xeon; measured: cached blocks ±1 on 87 of the 95 readings after the
    # first KV batch, queues on 95 of 96 readings; preemptions 79 rebuilt against vLLM's 79
    assert total >= 90 and len(cached) >= total - 1
    assert sum(cached) >= 87 and agree >= 95
    assert abs(rebuild.num_preemptions - rebuild.checks[-1].preemptions) <= 2


def test_the_rebuild_makes_the_steps_vllm_logged_and_agrees_with_every_reading():
    """A burst captured with vLLM's own line per engine step: the rebuild, driven by the wire alone, makes
    every one of vLLM's steps (the same requests and tokens scheduled, the same KV blocks held after)."""
    rebuild = replay_burst(STEPS_FIXTURE).rebuild
    logged = vllm_logged_steps(STEPS_FIXTURE)
    # captured 2026-12-03 on the AMD EPYC Zen 5 (capture --burst): 619 steps, 79 preemptions
    assert len(logged) > 600 and len(rebuild.steps) == len(logged)
    assert matching_steps(rebuild, logged) == len(logged)
    agree, total = agreement(rebuild.checks)
    assert total >= 90 and agree == total
    assert all(c.blocks_agree for c in rebuild.checks)
    assert rebuild.num_preemptions == rebuild.checks[-1].preemptions > 50
