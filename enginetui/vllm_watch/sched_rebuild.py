"""vLLM's scheduler state rebuilt step by step with this engine's own Scheduler and KV cache manager,
driven by what the proxy saw, and checked against every /metrics reading.

Each request through the proxy brings its arrival, prompt length and the time each token went by;
vLLM's pool, limits and max_model_len configure the scheduler, which is stepped as the simulator
steps it. The wire decides what the scheduler cannot know: when a step happened, where a request
stops, whom vLLM preempted among requests admitted together (_order_victims), which requests vLLM's
engine had taken in (_admitted_later). A reading is compared with the rebuilt state after the same
step as vLLM's gauges (_anchor). docs/vllm.md ("Rebuilt scheduler") gives every rule, and what
it cannot see: prompt token ids (no prefix-cache hits), requests around the proxy, async scheduling.
"""

import random
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass, field
from statistics import median

from enginetui.core.config import EngineConfig
from enginetui.core.request import Request, RequestStatus
from enginetui.core.sampling_params import SamplingParams
from enginetui.core.sched.output import SchedulerOutput, sampling_ids
from enginetui.core.sched.scheduler import Scheduler
from enginetui.simulate.event_sinks import EventSink
from enginetui.vllm_watch.rebuild_events import RebuildEvents
from enginetui.vllm_watch.reconstruct import TOLERANCE, QueuesCompared, worth_checking
from enginetui.vllm_watch.requests import WatchedRequest

STAND_IN_TOKEN = 0  # the token every rebuilt request "samples" (its stop comes from the wire)
MAX_CHECKS = 10_000  # readings kept
ORDER_TOKENS = 4  # a request that never ran is ordered by when its first this many tokens went by
MIN_STEP_GAP_S = 0.003  # the least gap between two steps' tokens on the wire that sets them apart (_admitted_later)


@dataclass(frozen=True, slots=True)
class RebuildSetup:
    """vLLM's configuration, as far as the rebuild needs it."""

    num_blocks: int  # KV blocks requests can hold (vLLM's num_gpu_blocks less its null block)
    block_size: int  # tokens per KV block
    prefix_caching: bool  # enable_prefix_caching
    max_num_seqs: int  # most requests running at once
    max_num_batched_tokens: int  # token budget of one step
    max_model_len: int  # longest prompt + output


@dataclass(frozen=True, slots=True)
class RebuiltStep:
    """The rebuilt state after one step."""

    time: float  # when the step ended, by the tokens it sampled going by (seconds, time.time())
    running: int  # requests running
    waiting: int  # requests waiting (preempted ones included)
    used_blocks: int  # KV blocks referenced
    preemptions: int  # preemptions so far, as vLLM's counter shows them (each once its request samples again)
    cached_blocks: int = (
        0  # KV blocks with a hash (full blocks, held or cached free): what vLLM's KV events show cached
    )
    output_steps: int = (
        0  # steps so far in which a request sampled (this one included): vLLM's step count (see reading())
    )
    scheduled_requests: int = 0  # requests the step computed tokens for
    scheduled_tokens: int = 0  # tokens it computed


@dataclass(frozen=True, slots=True)
class RebuildCheck(QueuesCompared):
    """One /metrics reading against the rebuilt state at its time (traffic and agreement: QueuesCompared)."""

    time: float  # when it was read
    running: float  # vLLM's num_requests_running
    waiting: float  # vLLM's num_requests_waiting
    preemptions: float  # vLLM's num_preemptions since the rebuild started
    rebuilt_running: int  # the rebuild's running requests
    rebuilt_waiting: int  # the rebuild's waiting requests
    rebuilt_preemptions: int  # the rebuild's preemptions so far
    kv_blocks: float | None = None  # KV blocks vLLM held: its kv_cache_usage_perc of its pool (None: not reported)
    rebuilt_kv_blocks: int = 0  # KV blocks the rebuild held (cached free blocks count as free, as in vLLM)
    cached_blocks: int | None = None  # blocks cached by vLLM's KV events (stored less removed; None: not listened to)
    rebuilt_cached_blocks: int = 0  # blocks the rebuild has cached (full blocks with a hash, held or free)

    @property
    def blocks_agree(self) -> bool | None:
        """The KV blocks held within one block of vLLM's (None: vLLM did not report its usage)."""
        return None if self.kv_blocks is None else abs(self.kv_blocks - self.rebuilt_kv_blocks) <= TOLERANCE

    @property
    def cached_agree(self) -> bool | None:
        """The cached blocks within one of vLLM's, by its KV events (None: they were not listened to)."""
        return None if self.cached_blocks is None else abs(self.cached_blocks - self.rebuilt_cached_blocks) <= TOLERANCE


@dataclass(slots=True)
class _Pending:
    """A /metrics reading waiting for the rebuild to pass its time."""

    time: float  # when it was read
    running: float  # vLLM's running gauge then
    waiting: float  # its waiting gauge then
    preemptions: float  # vLLM's preemption counter then (since the rebuild started)
    kv_blocks: float | None  # KV blocks vLLM held then (None: not reported)
    cached_blocks: int | None  # blocks vLLM had cached then, by its KV events (None: not listened to)
    steps: float | None  # vLLM's steps with outputs by then (its iteration_tokens_total count; None: not reported)


@dataclass(slots=True)
class SchedRebuild:
    """The rebuild of one vLLM server's scheduler; feed it requests and readings, call advance()."""

    setup: RebuildSetup  # vLLM's configuration
    sched: Scheduler = field(init=False)  # this engine's scheduler, standing in for vLLM's
    views: deque[WatchedRequest] = field(
        default_factory=deque
    )  # generating requests not yet in the scheduler, by arrival
    entered: dict[str, WatchedRequest] = field(
        default_factory=dict
    )  # requests in the scheduler (and ended there), by id
    steps: list[RebuiltStep] = field(default_factory=list)  # the rebuilt state after each timed step, in time order
    checks: deque[RebuildCheck] = field(default_factory=lambda: deque(maxlen=MAX_CHECKS))  # readings checked
    num_preemptions: int = 0  # preemptions rebuilt so far
    num_preemptions_counted: int = 0  # of those, the ones vLLM's counter shows by now (see _apply)
    _uncounted: dict[str, int] = field(default_factory=dict)  # preemptions not counted yet, by request id
    output_steps: int = 0  # rebuilt steps in which a request sampled (vLLM's steps with outputs), so far
    _steps_base: float | None = None  # vLLM's step count when the rebuild's was 0 (None: not anchored, see _anchor)
    _spell_starts: list[int] = field(default_factory=list)  # output_steps when each busy spell began
    _admitted_fresh: dict[str, int] = field(
        default_factory=dict
    )  # running requests never preempted: id -> admitting step
    num_skipped: int = 0  # requests left out: ended before vLLM reported their prompt length
    clock: float | None = None  # the rebuilt clock: the last timed step's end (None: no request yet)
    _plan: SchedulerOutput | None = None  # the step scheduled and not applied yet (its tokens have not all gone by)
    _unsized: set[str] = field(
        default_factory=set
    )  # ids of requests in the scheduler whose prompt length is not known yet
    _sampling: list[str] = field(default_factory=list)  # ids of the requests that sample in _plan
    _untimed: list[tuple] = field(default_factory=list)  # states after steps that sampled nothing, awaiting a time
    _pending: deque[_Pending] = field(default_factory=deque)  # readings not yet passed
    _preempt_base: float | None = None  # vLLM's preemption counter at the first reading
    sinks: list[EventSink] = field(default_factory=list)  # where each rebuilt step goes as a StepEvent
    events: RebuildEvents | None = field(init=False, default=None)  # builds them (None: no sinks)

    def __post_init__(self) -> None:
        s = self.setup
        config = EngineConfig(
            device="cpu",
            block_size=s.block_size,
            enable_prefix_caching=s.prefix_caching,
            max_num_seqs=s.max_num_seqs,
            max_num_batched_tokens=s.max_num_batched_tokens,
            max_model_len=s.max_model_len,
            async_scheduling=False,
        )
        self.sched = Scheduler(config, s.num_blocks, s.max_model_len)
        self.events = RebuildEvents(config, self.sinks, self._wire_reason) if self.sinks else None

    def _wire_reason(self, req_id: str) -> str | None:
        view = self.entered.get(req_id)
        return view.finish_reason if view is not None else None

    # ---- input ---------------------------------------------------------------------------

    def track(self, view: WatchedRequest) -> None:
        """A generating request seen (in arrival order)."""
        if view.generates:
            self.views.append(view)

    def reading(
        self,
        time: float,
        running: float,
        waiting: float,
        preemptions: float,
        kv_usage: float | None = None,
        cached_blocks: int | None = None,
        steps: float | None = None,
    ) -> None:
        """A /metrics reading: vLLM's gauges, its preemption counter (total since it started) and its
        kv_cache_usage_perc (a fraction of its pool less the null block: vLLM's BlockPool.get_usage()),
        the blocks its KV events show cached by then (stored, less removed), and its steps with outputs so
        far: the count of `vllm:iteration_tokens_total`, which vLLM's front end observes once per engine
        step that sent outputs, in the same call that sets the gauges from that step's stats. So a reading
        shows the state after vLLM's n-th step with outputs (or a step without any right after it), and
        the rebuild compares it with its own state after its n-th, whenever its tokens went by."""
        if self._preempt_base is None:
            self._preempt_base = preemptions
        blocks = None if kv_usage is None else kv_usage * self.setup.num_blocks
        self._pending.append(
            _Pending(time, running, waiting, preemptions - self._preempt_base, blocks, cached_blocks, steps)
        )

    # ---- stepping ------------------------------------------------------------------------

    def advance(self) -> None:
        """Step as far as the wire allows, then check the readings the rebuild has passed."""
        sched = self.sched
        while True:
            if self._plan is None:
                self._admit()
                self._size_prompts()
                self._order_waiting()
                self._end_finished()
                if self._unsized_may_run():
                    break  # the step might admit a request whose prompt length is not known yet
                if not sched.has_unfinished_requests():
                    if self.events is not None:
                        self.events.on_update(sched, self.clock or 0.0)
                    else:
                        sched.drain_step_record()
                    if not self.views or self._gate() is None:
                        break  # idle, or idle until the first token of the next step shows
                    continue
                if not self._order_victims():
                    break  # the step may preempt, and whom is not known yet
                late = self._admitted_later()
                if late is None:
                    break  # the step may admit, and whom is not known yet
                for request in late:  # out of the scheduler's reach for this step, still waiting after it
                    sched.waiting.remove(request)
                self._plan = sched.schedule()
                for request in late:
                    sched.waiting.add(request)
                for new in self._plan.scheduled_new_reqs:
                    if not sched.requests[new.req_id].num_preemptions:
                        self._admitted_fresh[new.req_id] = len(self.steps) + len(self._untimed)
                self._sampling = sampling_ids(self._plan, sched.requests)
            times = self._token_times()
            if times is None:
                break  # a token this step samples has not gone by yet
            self._apply(times)
        self._check()

    def _admit(self) -> None:
        """Put the requests that arrived by the next step into the scheduler, in the order vLLM took
        them in: by their first token (requests that arrive together reach vLLM in no set order;
        vLLM admits first come, first served, so the first it took in are the first to sample)."""
        idle = not self.sched.has_unfinished_requests()
        gate = self._gate()
        arrived = []
        if gate is None:
            return
        if idle and self.views:
            # The step that ends an idle spell: vLLM's engine ran it as soon as it had a request, with
            # the requests its API server had handed it by then (however many reached the proxy), and
            # a request never run before samples its first token in the step that admits it. So the
            # requests it ran are those whose first token went by first; the others enter before the
            # next step, which admits every request that arrived by the end of this one.
            first = min(t for v in self.views if (t := _first_token(v)) is not None)
            arrived = [v for v in self.views if _handed_over_by(v, gate) and _first_token(v) == first]
            self._spell_starts.append(self.output_steps)
        else:
            arrived = [v for v in self.views if _handed_over_by(v, gate)]
        if arrived:
            chosen = {id(v) for v in arrived}
            self.views = deque(v for v in self.views if id(v) not in chosen)
        arrived.sort(key=lambda v: at if (at := _first_token(v)) is not None else float("inf"))
        for view in arrived:
            if view.prompt_tokens is None and not view.active:
                self.num_skipped += 1  # never reported (refused, failed, or no usage): left out
                continue
            self.clock = view.arrival if self.clock is None else self.clock
            self.entered[view.req_id] = view
            if view.prompt_tokens is None:
                self._unsized.add(view.req_id)
            request = _engine_request(view, self.setup.max_model_len)
            self.sched.add_request(request)
            if self.events is not None:
                self.events.on_add(request)

    def _gate(self) -> float | None:
        """Requests that arrived by this time enter before the next step: the previous step's end; after
        idle, the first token of the step that ends it (every request that arrived by then could be in it).
        None: idle, and no waiting request has a token yet, so when the next step ends is not known (the
        requests wait outside until then: they may reach vLLM's engine in any order, and vLLM's engine
        takes in what its API server handed it by then, not what reached the proxy)."""
        if self.sched.has_unfinished_requests() or not self.views:
            return self.clock if self.clock is not None else float("-inf")
        first = min((t for v in self.views if (t := _first_token(v)) is not None), default=None)
        if first is None:
            return None
        handed = min(t for v in self.views if (t := v.handed_over) is not None)  # a view with a token was
        self.clock = max(self.clock or handed, handed)
        return max(first, self.clock)

    def _size_prompts(self) -> None:
        """Give the waiting requests whose prompt length came meanwhile their prompt; leave out those
        that ended without one."""
        for req_id in list(self._unsized):
            view, request = self.entered[req_id], self.sched.requests.get(req_id)
            if view.prompt_tokens is not None:
                self._unsized.discard(req_id)
                if request is not None:
                    fresh = _engine_request(view, self.setup.max_model_len)
                    request.prompt_token_ids, request.max_tokens = fresh.prompt_token_ids, fresh.max_tokens
            elif not view.active:
                self._unsized.discard(req_id)
                self.num_skipped += 1
                if request is not None:
                    self.sched.finish_requests([req_id], RequestStatus.FINISHED_ABORTED, "no prompt length")

    def _order_waiting(self) -> None:
        """Keep the requests that never ran in the order vLLM admits them: by when their first tokens
        went by (_admission_time), as they go by. vLLM admits first come, first served (whoever reached
        its engine first samples first), so a request whose first tokens went by earlier was ahead of
        one whose first tokens went by later, whatever order they reached the proxy in; one whose first
        token has not gone by yet is behind all that have (and, unsized, it holds the rebuild while it
        might be admitted: _unsized_may_run).
        Preempted requests stay where vLLM put them: at the head, in the order they were preempted."""
        waiting = self.sched.waiting
        fresh = [r for r in waiting if r.num_preemptions == 0]
        key = [t if (t := _admission_time(self.entered[r.request_id])) is not None else float("inf") for r in fresh]
        if all(a <= b for a, b in zip(key, key[1:])):
            return
        order = [r for _, r in sorted(zip(key, fresh), key=lambda pair: pair[0])]  # stable: ties keep their order
        for request in fresh:
            waiting.remove(request)
        for request in order:
            waiting.add(request)

    def _unsized_may_run(self) -> bool:
        """A request of unknown prompt length is among the first waiting ones for the free seats."""
        if not self._unsized:
            return False
        seats = self.setup.max_num_seqs - len(self.sched.running)
        for i, request in enumerate(self.sched.waiting):
            if i >= seats:
                return False
            if request.request_id in self._unsized:
                return True
        return False

    def _order_victims(self) -> bool:
        """Order the requests vLLM would preempt first as the wire shows it did; False: the next step
        may preempt and the wire does not show yet whom. vLLM preempts the running request it admitted
        last; requests it admitted fresh in one step were admitted in the order they reached its engine,
        which the wire does not show (their first tokens went by together). So the trailing run of such
        requests is ordered by when their next tokens went by, latest last: a request vLLM preempted
        samples its next token only after it is admitted again, later than the others of the step that
        preempted it. While one of them has not sampled it yet (and is still streaming), the order waits
        for it if the step may preempt."""
        running = self.sched.running
        if len(running) < 2 or (last := self._admitted_fresh.get(running[-1].request_id)) is None:
            return True
        start = len(running) - 1
        while start > 0 and self._admitted_fresh.get(running[start - 1].request_id) == last:
            start -= 1
        if start == len(running) - 1:
            return True
        times = {r.request_id: self._next_token_time(r) for r in running[start:]}
        if any(t == float("inf") and self.entered[i].active for i, t in times.items()) and self._may_preempt():
            return False
        running[start:] = sorted(running[start:], key=lambda r: times[r.request_id])
        return True

    def _admitted_later(self) -> list[Request] | None:
        """The requests that never ran and that the next step could admit, but which vLLM admitted in a
        later step, as the wire shows (None: it does not show yet). vLLM's engine admits the requests its
        API server has handed it by then; under a burst that server hands them over a few at a time, so
        the first steps admit fewer than the seats, budget and pool allow. A request admitted in a step
        samples its first token in it, as the requests already decoding sample their next: so one whose
        first token went by no earlier than the first of the decoding requests' tokens of the step after
        was admitted later (one whose first token has not gone by then, too). That holds where the wire
        sets the two steps apart: a gap between them of MIN_STEP_GAP_S at least, and no narrower than
        the spread of the step's own tokens. Elsewhere (a stream that fell behind sends several tokens
        at once, one stream after another) it tells nothing, and the scheduler admits as it would."""
        sched = self.sched
        seats = self.setup.max_num_seqs - len(sched.running)
        fresh = [r for r in sched.waiting if r.num_preemptions == 0]
        if seats <= 0 or not fresh:
            return []
        decoding = [r for r in sched.running if r.num_computed_tokens == r.num_tokens - 1]  # they sample next
        if not decoding:
            return []  # nothing samples on the wire's clock: admit as the scheduler does
        lanes = self._lanes(decoding, 2)
        if lanes is None:
            return None  # those tokens have not all gone by yet
        if not lanes:
            return []
        step_starts, step_ends = min(t[0] for t in lanes), max(t[0] for t in lanes)
        admitted_before = min(t[1] for t in lanes)  # the next step's first token
        if admitted_before - step_ends < max(MIN_STEP_GAP_S, step_ends - step_starts):
            # the wire does not set this step and the next apart: try this one and the one after that
            lanes = self._lanes(decoding, 3)
            if lanes is None:
                return None
            if not lanes:
                return []
            admitted_before = min(t[2] for t in lanes)
            if admitted_before - max(t[0] for t in lanes) < MIN_STEP_GAP_S:
                return []  # nor those: it tells nothing here
        late = []
        for request in fresh:
            if seats == 0:
                break
            times = self.entered[request.request_id].token_times
            if times and times[0] < admitted_before:
                seats -= 1
            else:
                late.append(request)
        return late

    def _lanes(self, decoding: list[Request], n: int) -> list[list[float]] | None:
        """When the decoding requests' next `n` tokens went by, for those whose went by (None: one still
        streaming has not sent them yet)."""
        lanes = [
            self.entered[r.request_id].token_times[r.num_output_tokens : r.num_output_tokens + n] for r in decoding
        ]
        if any(len(times) < n and self.entered[r.request_id].active for r, times in zip(decoding, lanes)):
            return None
        return [times for times in lanes if len(times) == n]

    def _may_preempt(self) -> bool:
        """The running requests' next tokens could need more blocks than are free."""
        kv, size = self.sched.kv, self.setup.block_size
        need = sum(-(-r.num_tokens // size) - len(kv.block_ids(r.request_id)) for r in self.sched.running)
        return need + len(self.sched.running) > kv.pool.num_free_blocks

    def _next_token_time(self, request: Request) -> float:
        """When the request's next token went by (inf: not yet, or never)."""
        times = self.entered[request.request_id].token_times
        k = request.num_output_tokens
        return times[k] if k < len(times) else float("inf")

    def _end_finished(self) -> None:
        """Requests whose response ended with no more tokens than the rebuild gave them end now."""
        done = [
            r.request_id
            for r in self.sched.requests.values()
            if not self.entered[r.request_id].active
            and r.num_output_tokens >= len(self.entered[r.request_id].token_times)
        ]
        if done:
            self.sched.finish_requests(done, RequestStatus.FINISHED_ABORTED, "ended on the wire")

    def _token_times(self) -> list[float] | None:
        """When the tokens the planned step samples went by (None: one has not yet)."""
        times = []
        for req_id in self._sampling:
            request = self.sched.requests[req_id]
            view = self.entered[req_id]
            k = request.num_output_tokens
            if k < len(view.token_times):
                times.append(view.token_times[k])
            elif view.active:
                return None
        return times

    def _apply(self, times: list[float]) -> None:
        sched, plan = self.sched, self._plan
        if plan is None:
            raise RuntimeError("no scheduled step to apply")
        for req_id in self._sampling:
            view = self.entered[req_id]
            if not view.active:  # stop where the wire stopped
                request = sched.requests[req_id]
                request.max_tokens = max(len(view.token_times), request.num_output_tokens + 1)
        sched.update_from_output(plan, dict.fromkeys(self._sampling, STAND_IN_TOKEN))
        self.output_steps += bool(self._sampling)
        for req_id in plan.preempted_req_ids:
            self._admitted_fresh.pop(req_id, None)
            self.entered[req_id].rebuilt_preemptions += 1
            self._uncounted[req_id] = self._uncounted.get(req_id, 0) + 1
        self.num_preemptions += len(plan.preempted_req_ids)
        # vLLM's num_preemptions counter moves late: the scheduler records a PREEMPTED event on the
        # request, and the event leaves the engine core with that request's next output (its next
        # sampled token, after the recompute), where the front end counts it. So a preemption
        # shows in /metrics at the step in which the preempted request next samples.
        for req_id in self._sampling:
            self.num_preemptions_counted += self._uncounted.pop(req_id, 0)
        end = max(median(times), self.clock or 0.0, self.steps[-1].time if self.steps else 0.0) if times else None
        if self.events is not None:  # a step that sampled nothing is shown at the last time known
            start = self.clock or 0.0
            self.events.on_step(sched, plan, dict.fromkeys(self._sampling, STAND_IN_TOKEN), start, end or start)
        else:
            sched.drain_step_record()
        scheduled = plan.num_scheduled_tokens
        self._plan = None
        for req_id in [i for i in self._admitted_fresh if i not in sched.requests]:
            del self._admitted_fresh[req_id]  # ended
        state = (
            len(sched.running),
            len(sched.waiting),
            sched.kv.num_blocks - sched.kv.pool.num_free_blocks,
            self.num_preemptions_counted,
            sum(map(len, sched.kv.pool.cached.values())),
            self.output_steps,
            len(scheduled),
            sum(scheduled.values()),
        )
        if end is None:
            self._untimed.append(state)
            return
        for earlier in self._untimed:
            self.steps.append(RebuiltStep(end, *earlier))
        self._untimed.clear()
        self.steps.append(RebuiltStep(end, *state))
        self.clock = end

    # ---- checking ------------------------------------------------------------------------

    def _check(self) -> None:
        """Check every pending reading the rebuild has passed (all of them once the traffic ended).
        A reading with vLLM's step count is compared with the rebuilt state after the same number of steps
        with outputs (_step_index); one without (or before the count is anchored), with the state at its
        time. A reading of an idle vLLM re-anchors the count (_anchor)."""
        idle = self._is_idle()
        passed = self.steps[-1].time if self.steps else None
        while self._pending:
            p = self._pending[0]
            n = self._step_index(p)
            vllm_idle = p.steps is not None and not (p.running or p.waiting)
            if n is not None and not vllm_idle:
                ready = idle or self.output_steps > n
            else:
                ready = idle or (passed is not None and p.time < passed)
            if not ready:
                break
            self._pending.popleft()
            state = self.state_at(p.time) if n is None or vllm_idle else self.state_after(n)
            running, waiting, preempted, blocks, cached = state
            if p.steps is not None and (vllm_idle or self._steps_base is None):
                self._anchor(p.time, p.steps, vllm_idle)
            check = RebuildCheck(
                p.time,
                p.running,
                p.waiting,
                p.preemptions,
                running,
                waiting,
                preempted,
                p.kv_blocks,
                blocks,
                p.cached_blocks,
                cached,
            )
            if worth_checking(check, self.checks):
                self.checks.append(check)

    def _is_idle(self) -> bool:
        """Nothing left to rebuild: no step planned, no request waiting outside or in the scheduler."""
        return self._plan is None and not self.views and not self.sched.has_unfinished_requests()

    def _step_index(self, p: _Pending) -> int | None:
        """How many steps with outputs vLLM had made, by the rebuild's count, when `p` was read (None:
        vLLM does not report its steps, or the count is not anchored yet)."""
        if p.steps is None or self._steps_base is None:
            return None
        return round(p.steps - self._steps_base)

    def _anchor(self, time: float, steps: float, vllm_idle: bool) -> None:
        """Match vLLM's step count with the rebuild's. Where vLLM read idle, its count is the rebuild's at
        the end of a busy spell: the one nearest to where the count stood (the two may differ by a few
        steps within a spell, which is much longer), so every idle spell anchors it again. Until vLLM is
        first read idle (a watcher started while it was busy), the rebuild's count at `time` stands in."""
        guess: float
        if self._steps_base is None:
            lo = bisect_right(self.steps, time, key=lambda s: s.time)
            guess = self.steps[lo - 1].output_steps if lo else 0
        else:
            guess = steps - self._steps_base
        if vllm_idle:
            ends = [0, *self._spell_starts, *([self.output_steps] if self._is_idle() else [])]
            guess = min(ends, key=lambda end: abs(end - guess))
        self._steps_base = steps - guess

    def state_after(self, n: int) -> tuple[int, int, int, int, int]:
        """The rebuilt state after its n-th step with outputs (and the steps without any after it)."""
        return self._state(bisect_right(self.steps, n, key=lambda s: s.output_steps))

    def state_at(self, when: float) -> tuple[int, int, int, int, int]:
        """(running, waiting, preemptions so far, KV blocks held, blocks cached) rebuilt at `when`: after
        the last step that ended by then."""
        return self._state(bisect_right(self.steps, when, key=lambda s: s.time))

    def _state(self, done: int) -> tuple[int, int, int, int, int]:
        """The state after the first `done` rebuilt steps."""
        if done == 0:
            # vLLM sets its gauges from the stats of a step (logged after it), so before its first step
            # they read as it left them: nothing running or waiting (requests that reached it meanwhile
            # do not show until a step runs)
            return 0, 0, 0, 0, 0
        step = self.steps[done - 1]
        return step.running, step.waiting, step.preemptions, step.used_blocks, step.cached_blocks


def _handed_over_by(view: WatchedRequest, when: float) -> bool:
    """vLLM's engine had the request by `when` (WatchedRequest.handed_over)."""
    return (handed := view.handed_over) is not None and handed <= when


def _first_token(view: WatchedRequest) -> float | None:
    """When the request's first generated token went by (None: not yet)."""
    if view.first_token is not None:
        return view.first_token
    return view.token_times[0] if view.token_times else None


def _admission_time(view: WatchedRequest) -> float | None:
    """When the request's first tokens went by: the median time of its first ORDER_TOKENS (of those
    gone by so far). Not its first token alone: vLLM's front end may hold a new stream's first chunk
    back while the requests admitted with it stream on (their tokens then go by together, a few steps
    late), and the median of a few tokens sampled one step apart ignores one late chunk."""
    times = view.token_times[:ORDER_TOKENS]
    return sorted(times)[len(times) // 2] if times else _first_token(view)


def _engine_request(view: WatchedRequest, max_model_len: int) -> Request:
    """The scheduler's Request for a request seen: its prompt length in tokens no other prompt shares
    (the wire has no token ids), its max_tokens (the wire's final count once it ended)."""
    prompt_len = view.prompt_tokens or 1
    if not view.active:
        max_tokens = max(1, len(view.token_times))
    else:
        max_tokens = view.max_tokens if view.max_tokens is not None else max_model_len - prompt_len
    max_tokens = max(1, min(max_tokens, max_model_len - prompt_len))
    rng = random.Random(view.req_id)
    prompt = [rng.randrange(2, 1 << 30) for _ in range(prompt_len)]
    params = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
    return Request(view.req_id, prompt, params, [], view.arrival, 0, max_tokens)
