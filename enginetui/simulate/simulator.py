"""The simulator: the engine's own Scheduler and KV cache manager, stepped on a simulated clock.

Nothing here decides what runs: each step is `Scheduler.schedule()` and
`Scheduler.update_from_output()` exactly as EngineCore calls them. What stands in for the model:
- sampled tokens: a request samples when a step computes its last known token (the model runner's
  rule); the token is the workload's (recordings) or STAND_IN_TOKEN;
- output lengths: each request has max_tokens = its workload output length and ignores EOS, so the
  scheduler's own stop check ends it after exactly that many tokens;
- time: the step-time model moves the clock by each step's shape; requests enter when the clock
  reaches their arrival (between steps, as EngineCore takes in requests), the clock jumps to the next
  arrival when the engine is idle.
"""

import gc
import math
from array import array
from collections import deque
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache

import msgspec
import numpy as np

from enginetui.core.config import EngineConfig
from enginetui.core.request import Request
from enginetui.core.sampling_params import SamplingParams
from enginetui.core.sched.output import sampling_ids
from enginetui.core.sched.scheduler import Scheduler
from enginetui.simulate.step_time import StepTimeModel
from enginetui.simulate.workload import TOKEN_RANGE, SimRequest, prompt_token_array

STAND_IN_TOKEN = 0  # the token every simulated request "samples" (no EOS is ever set, so it stops nothing)
STAND_IN_PROMPT_TOKEN = 1  # prompt filler where token values cannot matter (prefix caching off)


@dataclass(slots=True)
class RequestTimes:
    """Per request (index-aligned with the workload, sorted by arrival): what happened when."""

    arrival: array  # [n] seconds it entered the engine
    first_token: array  # [n] seconds its first token was sampled (nan: never)
    finish: array  # [n] seconds it finished (nan: never; rejected requests never finish)
    num_output: array  # [n] tokens it generated
    num_preemptions: array  # [n] times it was preempted
    itl: array  # every gap between two consecutive tokens of one request, seconds (all requests, in no set order)


@dataclass(slots=True)
class Timeline:
    """Per step: the clock and the engine's state after the step."""

    end: array  # [steps] seconds at the end of the step
    seconds: array  # [steps] how long the step took
    num_prefill_tokens: array  # [steps] prompt / recompute tokens
    num_decode_tokens: array  # [steps] decode tokens
    num_running: array  # [steps] running requests after the step
    num_waiting: array  # [steps] waiting requests after the step
    kv_used_blocks: array  # [steps] blocks referenced after the step
    num_preempted: array  # [steps] preemptions during the step


@dataclass(slots=True)
class SimRun:
    """What one simulation produced."""

    requests: list[SimRequest]  # the workload, sorted by arrival (index-aligned with `times`)
    times: RequestTimes  # per request
    timeline: Timeline  # per step
    num_blocks: int  # KV pool size
    num_rejected: int  # requests refused at admission (they could never fit)
    first_rejection: str  # why the first of them was refused ("" if none was)
    step_model: str  # the step-time model's name
    wall_seconds: float  # how long the simulation itself took (this machine's seconds)
    prefix_queries: int = 0  # prompt tokens looked up in the prefix cache at first admissions
    prefix_hits: int = 0  # of which found there


class FrontEnd:
    """One engine's HTTP front-end as one queue served in the order its work came (a single thread): it takes
    each request in (`request_s`) before its engine does, and streams each step's sampled tokens to their
    clients (`step_s` a step that sampled, and `token_s` a token) before they reach them. So a busy engine's
    streaming delays the next request's way in, and a busy front-end delays the tokens: a request's first token
    and its end count for its client when the front-end has streamed them. A driver calls `take` in arrival
    order once every step that ended by that arrival has run (its tokens queued with `stream`), and `flush` at
    the end."""

    def __init__(self, request_s: float, token_s: float, step_s: float = 0.0) -> None:
        self.request_s = request_s  # seconds to take a request in
        self.token_s = token_s  # seconds to stream one sampled token
        self.step_s = step_s  # seconds to take in a step's outputs, whatever their number
        self.free = -math.inf  # when the front-end is done with the work served so far
        self._jobs: deque[tuple[float, int, list[int], list[int], RequestTimes]] = deque()  # steps' tokens, queued

    @property
    def streams(self) -> bool:
        """It streams the steps' tokens (else requests are its only work)."""
        return bool(self.token_s or self.step_s)

    def take(self, arrival: float) -> float:
        """A request reaches the front-end at `arrival`: when its engine takes it in."""
        return self.work(arrival, self.request_s)

    def work(self, at: float, seconds: float) -> float:
        """`seconds` of other work that reaches the front-end at `at` (a router's tokenize call): when it is done."""
        self._serve(at)
        self.free = max(self.free, at) + seconds
        return self.free

    def stream(self, at: float, tokens: int, firsts: list[int], ends: list[int], times: RequestTimes) -> None:
        """A step ending at `at` sampled `tokens`; `firsts` got their first token, `ends` ended (their
        positions in `times`, whose client-side times are set when the front-end has streamed them)."""
        self._jobs.append((at, tokens, firsts, ends, times))

    def flush(self) -> None:
        self._serve(math.inf)

    def _serve(self, until: float) -> None:
        """Stream the steps' tokens queued by `until` (before a request that arrives then)."""
        jobs = self._jobs
        while jobs and jobs[0][0] <= until:
            at, tokens, firsts, ends, times = jobs.popleft()
            done = self.free = max(self.free, at) + self.step_s + tokens * self.token_s
            for k in firsts:
                times.first_token[k] = done
            for k in ends:
                times.finish[k] = done


def front_end_delays(arrivals, seconds_per_request: float) -> np.ndarray:
    """[n] per request of `arrivals` ([n] seconds), seconds from its arrival until a front-end that takes
    `seconds_per_request` per request, one request at a time in arrival order (a queue of one server), is done
    with it."""
    arrival = np.asarray(arrivals, dtype=np.float64)  # [n]
    delays = np.empty(len(arrival), dtype=np.float64)  # [n]
    front = FrontEnd(seconds_per_request, 0.0)
    for k in np.argsort(arrival, kind="stable").tolist():
        delays[k] = front.take(arrival[k]) - arrival[k]
    return delays


def add_served_path(run: SimRun, front_end_seconds: float) -> None:
    """`run` as its clients see it through the served path, for a disaggregated fleet (the others' engines take a
    request only after its front-end: Simulator, fleet.run_fleet): one queue per engine that takes
    `front_end_seconds` per request (front_end_delays), a request's first token and its end reaching its client
    that much later; the engine still takes each request at its arrival."""
    if front_end_seconds:
        t = run.times
        for k, delay in enumerate(front_end_delays(np.frombuffer(t.arrival), front_end_seconds).tolist()):
            t.first_token[k] += delay
            t.finish[k] += delay


class Observer:
    """What a simulation tells whoever watches it (a recording, a live view); each method may be left out."""

    def on_add(self, request: Request) -> None:
        """A request entered the engine (added to the scheduler, or rejected by it)."""

    def on_step(self, sched: Scheduler, plan, sampled: dict[str, int], start: float, end: float) -> None:
        """The step ran from `start` to `end` (simulated seconds) and sampled `sampled`; the scheduler's step
        record (with the pool's changes) is the observer's to drain."""


class Simulator:
    """Runs a workload through a fresh Scheduler on the simulated clock."""

    def __init__(
        self,
        config: EngineConfig,
        num_blocks: int,
        max_model_len: int,
        step_model: StepTimeModel,
        observer: Observer | None = None,
        fast_forward: bool = True,
        front_end_seconds: float = 0.0,
        front_end_token_seconds: float = 0.0,
        front_end_step_seconds: float = 0.0,
    ) -> None:
        self.config = config  # the engine's flags (budgets, policies, block size, prefix caching)
        self.num_blocks = num_blocks  # KV pool size
        self.max_model_len = max_model_len  # longest prompt + output
        self.step_model = step_model  # the clock
        self.observer = observer  # told of every request and step (None: nobody, the fast path)
        self.fast_forward = fast_forward  # run stretches of plain decode steps in one go (same result, see EngineLoop)
        # the served path: a front-end takes this long a request, one at a time, before the engine takes it in,
        # and (FrontEnd) this long a step and a token to stream each step's tokens, in the same queue
        self.front_end_seconds = front_end_seconds
        self.front_end_token_seconds = front_end_token_seconds
        self.front_end_step_seconds = front_end_step_seconds

    def run(self, workload: list[SimRequest], progress: Callable[[int], None] | None = None) -> SimRun:
        """Serve `workload`; `progress(finished)` is called every few steps with the count of ended requests."""
        with collector_paused():
            return self._run(workload, progress)

    def _run(self, workload: list[SimRequest], progress: Callable[[int], None] | None) -> SimRun:
        import time

        wall0 = time.perf_counter()
        reqs = sorted(workload, key=lambda r: r.arrival)
        n = len(reqs)
        front = FrontEnd(self.front_end_seconds, self.front_end_token_seconds, self.front_end_step_seconds)
        streaming = front if front.streams else None
        loop = EngineLoop(
            self.config,
            self.num_blocks,
            self.max_model_len,
            self.step_model,
            self.observer,
            self.fast_forward,
            recorded_tokens=any(r.output_token_ids for r in reqs),
            front_end=streaming,
        )
        model = self.step_model
        enters = [r.arrival for r in reqs]  # when each request enters the engine
        if self.front_end_seconds and streaming is None:
            enters = (np.array(enters) + front_end_delays(enters, self.front_end_seconds)).tolist()
        taken = 0  # with a streaming front-end: the requests it has taken in (their entries known from then on)

        def take_arrived(front: FrontEnd, now: float) -> None:
            """The front-end takes in the requests that reached it by `now` (every step that ended by then ran)."""
            nonlocal taken
            while taken < n and reqs[taken].arrival <= now:
                enters[taken] = front.take(reqs[taken].arrival)
                taken += 1

        loop.now = enters[0] if reqs else 0.0
        i = 0
        reported = 0
        while True:
            loop.now = model.next_start(loop.now, loop.num_steps + 1)
            if streaming is not None:
                take_arrived(streaming, loop.now)
            known = taken if streaming is not None else n  # the requests whose entries are known
            while i < known and enters[i] <= loop.now:
                loop.add(reqs[i])
                i += 1
            if not loop.busy():
                loop.idle()
                if i >= n:
                    break
                if streaming is not None:
                    take_arrived(streaming, max(loop.now, reqs[i].arrival))
                loop.now = max(loop.now, enters[i])  # idle until the next request enters
                continue
            loop.step(enters[i] if i < n else math.inf)
            if progress is not None and loop.num_steps - reported >= 64:
                reported = loop.num_steps
                progress(loop.num_ended)
        if streaming is not None:
            streaming.flush()
        if progress is not None:
            progress(loop.num_ended)
        return loop.result(time.perf_counter() - wall0)


@contextmanager
def collector_paused():
    """The cyclic garbage collector off for a run: a run makes millions of objects none of which form cycles,
    and the collector's passes over them cost about a fifth of its time."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class EngineLoop:
    """One engine's state on the simulated clock: its scheduler, the clock `now`, and what happened to each
    request added (index-aligned, in the order added). A driver adds requests when the clock reaches their
    arrival and calls `step` while the engine is busy (Simulator for one engine, fleet.py for several).

    Fast forward: when nothing waits and every running request is decoding, the steps up to the one before
    a request ends (or the pool would run dry) are all alike: each request one token, and a block where it
    crosses a block boundary. They are planned at once (their times from the step-time model), run as the
    driver's clock passes them, and applied (`commit`) when a request is added or the state is looked at,
    with the very calls the scheduler makes on such steps (allocate_slots where a block is crossed or filled,
    in step then running order): the same run, step for step.
    """

    def __init__(
        self,
        config: EngineConfig,
        num_blocks: int,
        max_model_len: int,
        step_model: StepTimeModel,
        observer: Observer | None = None,
        fast_forward: bool = True,
        recorded_tokens: bool = False,
        front_end: FrontEnd | None = None,
    ) -> None:
        self.config = config
        self.num_blocks = num_blocks
        self.max_model_len = max_model_len
        self.model = step_model
        self.observer = observer
        self.recorded_tokens = recorded_tokens  # some request "samples" recorded tokens
        # streams each step's tokens to the clients (None: tokens reach them as they are sampled)
        self.front_end = front_end if front_end is not None and front_end.streams else None
        self.sched = Scheduler(config, num_blocks, max_model_len)
        self.requests: list[SimRequest] = []  # added, in order
        self._nan = float("nan")
        self.times = RequestTimes(array("d"), array("d"), array("d"), array("l"), array("l"), array("f"))
        self.timeline = Timeline(*(array("d") for _ in range(2)), *(array("l") for _ in range(6)))
        self.index: dict[str, int] = {}  # request id -> position in `requests`
        self.last_token = array("d")  # per request: when its latest token was sampled
        self.outputs_of: dict[str, list[int] | None] = {}  # request id -> its recorded tokens (None: stand-ins)
        self.now = 0.0  # the clock: when the engine is next free
        self.num_steps = 0
        self.num_ended = 0  # requests finished or rejected
        self.num_rejected = 0
        self.first_rejection = ""
        self.finish_times: list[float] = []  # when each ended request ended, in order (rejections: when added)
        self.finished_order: list[int] = []  # which request (its position in `requests`) each of those was
        self._plan: _DecodePlan | None = None  # alike decode steps planned ahead, some maybe run (fast forward)
        base = type(step_model)
        self.can_fast_forward = (
            fast_forward
            and self.front_end is None  # it streams every step's tokens
            and observer is None
            and not recorded_tokens
            and not config.use_async_scheduling
            and base.advance is StepTimeModel.advance
            and base.next_start is StepTimeModel.next_start
        )

    def add(self, r: SimRequest, request: Request | None = None) -> bool:
        """The request enters the engine now (`request`: its engine request, when already built). False: rejected."""
        self.commit()
        sched = self.sched
        if request is None:
            request = _engine_request(r, self.config.enable_prefix_caching, self.config.block_size)
        k = len(self.requests)
        self.requests.append(r)
        t = self.times
        t.arrival.append(r.arrival)
        t.first_token.append(self._nan)
        t.finish.append(self._nan)
        t.num_output.append(0)
        t.num_preemptions.append(0)
        self.last_token.append(self._nan)
        self.index[request.request_id] = k
        self.outputs_of[request.request_id] = r.output_token_ids
        sched.add_request(request)
        if self.observer is not None:
            self.observer.on_add(request)
        if request.request_id not in sched.requests:
            self.first_rejection = self.first_rejection or request.finish_detail
            self.num_rejected += 1
            self.num_ended += 1
            self.finish_times.append(self.now)
            self.finished_order.append(k)
            return False
        return True

    def busy(self) -> bool:
        return self.sched.has_unfinished_requests()

    def idle(self) -> None:
        """Nothing to run: drop what the scheduler recorded between steps when nobody reads it (rejections)."""
        if self.observer is None:
            self.sched.drain_step_record()

    def step(self, until: float = math.inf) -> None:
        """Run one step from `now` (or, fast-forwarding, every alike decode step that starts before `until`)."""
        if self.can_fast_forward and self._decode_stretch(until):
            return
        sched = self.sched
        live = sched.requests
        times = self.times
        tl = self.timeline
        plan = sched.schedule()
        self.num_steps += 1
        sampling = sampling_ids(plan, live)
        shape = plan.shape  # numbered by schedule() calls; the simulator also counts the decode steps it fast-forwards
        if shape.step != self.num_steps:
            shape = msgspec.structs.replace(shape, step=self.num_steps)
        if self.recorded_tokens:
            sampled = {}
            for req_id in sampling:
                recorded = self.outputs_of[req_id]
                sampled[req_id] = recorded[len(live[req_id].output_token_ids)] if recorded else STAND_IN_TOKEN
        else:
            sampled = dict.fromkeys(sampling, STAND_IN_TOKEN)
        start = self.now
        now = self.now = self.model.advance(start, shape)
        index, last_token = self.index, self.last_token
        tokens, firsts, ends = 0, [], []
        for out in sched.update_from_output(plan, sampled):
            if out.finish_reason == "rejected":
                continue  # refused at admission (counted then): it never runs
            k = index[out.request_id]
            if out.new_token_ids:
                tokens += 1
                times.num_output[k] += 1
                if times.first_token[k] != times.first_token[k]:  # nan: the first token
                    times.first_token[k] = now
                    firsts.append(k)
                else:
                    times.itl.append(now - last_token[k])
                last_token[k] = now
            if out.finish_reason is not None:
                times.finish[k] = now
                ends.append(k)
                self.num_ended += 1
                self.finish_times.append(now)
                self.finished_order.append(k)
        if self.front_end is not None and tokens:
            self.front_end.stream(now, tokens, firsts, ends, times)
        for req_id in plan.preempted_req_ids:
            times.num_preemptions[index[req_id]] += 1
        tl.end.append(now)
        tl.seconds.append(now - start)
        tl.num_prefill_tokens.append(plan.num_prefill_tokens)
        tl.num_decode_tokens.append(plan.num_decode_tokens)
        tl.num_running.append(len(sched.running))
        tl.num_waiting.append(len(sched.waiting))
        tl.kv_used_blocks.append(self.num_blocks - sched.kv.pool.num_free_blocks)
        tl.num_preempted.append(len(plan.preempted_req_ids))
        if self.observer is not None:
            self.observer.on_step(sched, plan, sampled, start, now)
        else:  # nobody reads what the step recorded: drop it
            sched.drain_step_record()

    def _decode_stretch(self, until: float) -> bool:
        """Run the alike decode steps that start before `until` (at least one) from the current plan, made
        when there is none; False: the next step is not such a step."""
        plan = self._plan
        if plan is None:
            plan = self._plan = self._make_plan()
            if plan is None:
                return False
        ends = plan.ends
        k = len(ends)
        pos = plan.pos
        # step j (1-based) starts at ends[j - 2]: run those starting before `until`, and always the next one
        reach = int(np.searchsorted(ends, until, side="left")) + 1
        pos = max(pos + 1, min(k, reach))
        plan.pos = pos
        self.now = float(ends[pos - 1])
        self.num_steps = plan.base_steps + pos
        if pos == k:
            self.commit()
        return True

    def _make_plan(self) -> "_DecodePlan | None":
        """The alike decode steps from now: each running request one token, until the step before one ends
        or the pool would run dry (at least two steps), with their end times; None when there are none."""
        sched = self.sched
        running = sched.running
        num = len(running)
        if not num or len(sched.waiting) or num > self.config.max_num_batched_tokens:
            return None
        kv = sched.kv
        bs = kv.block_size
        max_steps = self.max_model_len
        context = 0
        for r in running:
            computed = r.num_computed_tokens
            if computed != r.num_tokens - 1 or not r.output_token_ids or r.num_output_placeholders:
                return None
            # the step that ends it (max_tokens, or max_model_len) runs on its own
            max_steps = min(max_steps, r.max_tokens - len(r.output_token_ids) - 1, self.max_model_len - computed - 2)
            context += computed
        if max_steps < 2:
            return None
        # the first step at which each request needs a new block (then every block_size steps)
        first_new = [len(kv.req_to_blocks.get(r.request_id, ())) * bs - r.num_computed_tokens + 1 for r in running]
        new_blocks = np.zeros(max_steps + 1, dtype=np.int64)  # [steps + 1] blocks taken at step j
        for j in first_new:
            if j <= max_steps:
                new_blocks[j::bs] += 1
        taken = np.cumsum(new_blocks)  # [steps + 1]
        free = kv.pool.num_free_blocks
        if taken[-1] > free:  # the pool runs dry: stop before the step that would preempt
            max_steps = int(np.searchsorted(taken, free, side="right")) - 1
            if max_steps < 2:
                return None
        contexts = context + num * np.arange(1, max_steps + 1, dtype=np.int64)  # [steps]
        seconds = self.model.decode_seconds(self.num_steps + 1, num, contexts)  # [steps]
        ends = np.cumsum(np.concatenate(([self.now], seconds)))[1:]  # [steps] the clock, added step by step
        used = (self.num_blocks - free) + taken[1 : max_steps + 1]  # [steps] blocks in use after each step
        return _DecodePlan(self.now, self.num_steps, list(running), first_new, ends, used)

    def commit(self) -> None:
        """Apply the steps of the current plan that ran to the scheduler, the requests and the timeline, with
        the calls the scheduler makes on such steps (allocate_slots where a block is crossed or filled, in
        step then running order)."""
        plan = self._plan
        if plan is None:
            return
        self._plan = None
        k = plan.pos
        if k == 0:
            return
        sched = self.sched
        kv = sched.kv
        bs = kv.block_size
        running = plan.running
        num = len(running)
        events: list[tuple[int, int]] = []  # (step, running position): allocate_slots calls that do something
        for pos, r in enumerate(running):
            j = plan.first_new[pos]
            while j <= k:
                events.append((j, pos))
                j += bs
            if kv.enable_prefix_caching:  # steps that fill a block publish it
                j = bs - r.num_computed_tokens % bs
                while j <= k:
                    events.append((j, pos))
                    j += bs
        events.sort()
        c0 = [r.num_computed_tokens for r in running]
        for j, pos in events:
            r = running[pos]
            r.num_computed_tokens = c0[pos] + j - 1
            missing = c0[pos] + j - r.num_tokens  # tokens the steps before j sampled
            if missing > 0:
                r.output_token_ids.extend([STAND_IN_TOKEN] * missing)
            kv.allocate_slots(r, 1)
        ends = plan.ends[:k]
        end = float(ends[-1])
        gaps = np.diff(ends).astype(np.float32).tobytes()  # [k - 1] between this stretch's tokens
        times, index, last_token = self.times, self.index, self.last_token
        itl = times.itl
        for pos, r in enumerate(running):
            r.num_computed_tokens = c0[pos] + k
            missing = c0[pos] + k + 1 - r.num_tokens
            if missing > 0:
                r.output_token_ids.extend([STAND_IN_TOKEN] * missing)
            r.num_tokens_sent_to_runner += k
            i = index[r.request_id]
            times.num_output[i] += k
            itl.append(float(ends[0]) - last_token[i])
            itl.frombytes(gaps)
            last_token[i] = end
        tl = self.timeline
        tl.end.frombytes(ends.tobytes())
        tl.seconds.frombytes(np.diff(np.concatenate(([plan.start], ends))).tobytes())
        zeros = bytes(8 * k)
        tl.num_prefill_tokens.frombytes(zeros)
        tl.num_decode_tokens.frombytes(np.full(k, num, dtype=np.int64).tobytes())
        tl.num_running.frombytes(np.full(k, num, dtype=np.int64).tobytes())
        tl.num_waiting.frombytes(zeros)
        tl.kv_used_blocks.frombytes(plan.used[:k].astype(np.int64).tobytes())
        tl.num_preempted.frombytes(zeros)
        sched.drain_step_record()

    def result(self, wall_seconds: float) -> SimRun:
        self.commit()
        kv = self.sched.kv
        return SimRun(
            self.requests,
            self.times,
            self.timeline,
            self.num_blocks,
            self.num_rejected,
            self.first_rejection,
            self.model.name,
            wall_seconds,
            kv.prefix_queries,
            kv.prefix_hits,
        )


@dataclass(slots=True)
class _DecodePlan:
    """Alike decode steps planned from `start`: run lazily (`pos` of them so far), applied by commit()."""

    start: float  # the clock when planned
    base_steps: int  # steps run before
    running: list[Request]  # the running requests, in order
    first_new: list[int]  # per running request: the first step at which it takes a new block
    ends: np.ndarray  # [steps] each step's end
    used: np.ndarray  # [steps] blocks in use after each step
    pos: int = 0  # steps run so far


def _engine_request(r: SimRequest, caching: bool, block_size: int = 0) -> Request:
    """The scheduler's Request for a workload request: forced output length, no EOS. With `block_size` (and
    caching) its prompt's block hashes are computed here, in one pass."""
    tokens = None
    if caching or r.prompt_token_ids is not None:  # token values matter only to prefix caching
        tokens = prompt_token_array(r)
        prompt = _token_list(tokens)
    else:
        prefix = r.prefix or []
        prompt = prefix + [STAND_IN_PROMPT_TOKEN] * (r.prompt_len - len(prefix))
    max_tokens = r.max_tokens or r.output_len
    params = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
    arrival_time = r.arrival if r.arrival_time is None else r.arrival_time
    request = Request(r.request_id, prompt, params, [], arrival_time, r.priority, max_tokens)
    if caching and block_size and tokens is not None:
        request.block_hashes = prompt_block_hashes(tokens, block_size)
    return request


_INT_OBJECTS = np.array(range(TOKEN_RANGE[1]), dtype=object)  # [4096] one int object per small token id


def _token_list(tokens: np.ndarray) -> list[int]:
    """tokens.tolist(), the ids under 4096 as shared int objects (tolist makes one per token over 256: a long
    prompt's list is a quarter of the memory this way)."""
    if len(tokens) and tokens.min() >= 0 and tokens.max() < len(_INT_OBJECTS):
        return _INT_OBJECTS.take(tokens).tolist()
    return tokens.tolist()


def prompt_block_hashes(tokens: list[int] | np.ndarray, block_size: int) -> list[bytes]:
    """The chained hashes of the full blocks of `tokens`: 16 bytes a block, equal exactly when the block's tokens
    and every token before them are equal (as the engine's SHA-256 chain, enginetui.core.kv.block_hash, which
    goes on from them for generated tokens), computed for the whole prompt at once: a per-block hash of its
    tokens (a random linear form through splitmix64), chained as a polynomial over the blocks, in two 64-bit
    lanes."""
    n = len(tokens) // block_size
    if not n:
        return []
    head = tokens[: n * block_size]
    flat = head.view(np.uint64) if isinstance(head, np.ndarray) else np.frombuffer(array("q", head), dtype=np.uint64)
    blocks = flat.reshape(n, block_size)
    weights, base, inverse = _block_hash_constants(block_size)
    with np.errstate(over="ignore"):
        content = _splitmix(blocks @ weights)  # [n, 2] each block's tokens
        powers = np.cumprod(np.broadcast_to(base, (n, 2)), axis=0)  # [n, 2] base^(j+1)
        inverse_powers = np.cumprod(np.broadcast_to(inverse, (n, 2)), axis=0)  # [n, 2] base^-(j+1)
        chained = _splitmix(np.cumsum(content * inverse_powers, axis=0) * powers)  # [n, 2]
    return chained.view("V16").ravel().tolist()  # [n] 16-byte bytes


@lru_cache(maxsize=8)
def _block_hash_constants(block_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per lane: odd weights per position in a block, the chain's odd base and its inverse modulo 2^64."""
    rng = np.random.default_rng(0x51A7ED)
    weights = rng.integers(1, 2**63, size=(block_size, 2), dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    base = [int(b) * 2 + 1 for b in rng.integers(1, 2**62, size=2, dtype=np.uint64)]
    inverse = [pow(b, -1, 2**64) for b in base]
    return weights, np.array(base, dtype=np.uint64), np.array(inverse, dtype=np.uint64)


def _splitmix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser (a bijection of uint64; wraps by design)."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))
