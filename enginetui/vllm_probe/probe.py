"""The probe's inside: reads vLLM's scheduler around its hooks and publishes this project's StepEvents.

Called by the scheduler subclasses (enginetui/vllm_probe/schedulers.py) in vLLM's engine process. It
imports no vLLM (it reads the scheduler object it is handed) and of enginetui only the event schema
and its publisher. It fills the same StepEvent our EngineCore fills (core/engine/event_builder.py), from
vLLM's state instead of ours, with the same event pattern: one "step" event per busy-loop step of
vLLM's EngineCore. A schedule() is held until the next hook: an update_from_output() that follows
joins it in one event (planned step N, executed step M; the same step when synchronous), another
schedule() first publishes it alone (asynchronous scheduling filling its batch queue).

Cost: with no subscriber nothing is built (the per-step work is a few counters); a slow subscriber
loses events at its full queue (zmq drops its copies; it counts the gaps in `seq`), vLLM never waits.
vLLM's block 0 is a placeholder never handed out: block ids are published minus one, and the pool
as vLLM's usage counts it (`num_gpu_blocks - 1`).
"""

import logging
import time
from dataclasses import dataclass, field

import msgspec
import zmq

from enginetui.core.engine.event_publisher import EventPublisher
from enginetui.core.engine.events import (
    SCHEMA_VERSION,
    Admission,
    Preemption,
    PrefillChunk,
    RequestAdded,
    RequestEnd,
    RequestProgress,
    StepEvent,
    StepPhase,
)
from enginetui.core.sampling_params import SamplingParams
from enginetui.core.sched.step_shape import StepShape
from enginetui.vllm_probe.config import ProbeConfig

log = logging.getLogger("vllm.enginetui_probe")  # under vLLM's logger: its handler prints it

# Pools larger than this are not scanned for cached-free blocks at every step (the scan visits every
# block): their events carry no cached-free blocks.
CACHED_SCAN_MAX_BLOCKS = 16384
_END_DETAILS = {
    "FINISHED_ABORTED": "aborted",
    "FINISHED_ERROR": "error",
    "FINISHED_IGNORED": "prompt too long",
    "FINISHED_LENGTH_CAPPED": "length limit reached",
    "FINISHED_REPETITION": "repetition detected",
}


@dataclass(slots=True)
class _Plan:
    """One schedule() as its event tells it."""

    step: int  # vLLM's step counter after it (Scheduler.current_step)
    sched_ms: float  # time in schedule()
    phase: StepPhase  # its wall-clock span
    scheduled: dict[str, int] = field(default_factory=dict)  # request id -> tokens (empty: nobody listened)
    num_prefill_tokens: int = 0
    num_decode_tokens: int = 0
    chunks: list[PrefillChunk] = field(default_factory=list)
    admitted: list[Admission] = field(default_factory=list)
    shape: StepShape = StepShape()  # its work, as the step-time models price it


class Probe:
    """Publishes one vLLM scheduler's step events on `address` (an XPUB socket it binds)."""

    def __init__(self, config: ProbeConfig, data_parallel_rank: int = 0, async_class: bool = False) -> None:
        self.address = config.endpoint_for_rank(data_parallel_rank)  # where subscribers connect
        self.async_class = async_class  # the scheduler is an AsyncScheduler (placeholders at schedule)
        self.enabled = True  # False once it failed: it never touches vLLM again
        self.subscribers = 0  # subscribers connected now (nothing is built while 0)
        self.seq = 0  # events published (the latest one's seq)
        self.step_count = 0  # busy-loop steps seen (a step event each)
        self.dropped = 0  # events the socket refused (zmq drops a full subscriber's copy silently instead)
        self.total_output_tokens = 0
        self.total_preemptions = 0
        self.prefix_cache_queries = 0  # as vLLM's scheduler stats report them (0 with --disable-log-stats)
        self.prefix_cache_hits = 0
        # The process-wide context: one owned here could block vLLM in its term() when collected.
        self._publisher = EventPublisher(zmq.Context.instance(), self.address, config.hwm)
        self._publisher.sock.setsockopt(zmq.XPUB_VERBOSER, 1)  # every unsubscribe too: count who listens
        self._plan: _Plan | None = None  # the schedule() whose event is not out yet
        self._in_flight: dict[
            int, tuple[int, float]
        ] = {}  # id(scheduler output) -> (its step, wall end of its schedule)
        self._admission: dict[
            str, tuple[int, float]
        ] = {}  # request id -> (prefix-cache hit, wall time) of its first admission
        self._sched_start = (0.0, 0.0)  # (wall, perf_counter) at the latest schedule()'s start
        self._update_start = (0.0, 0.0)
        self._running_before: set[str] | None = None  # running ids before the latest schedule() (None: not listening)
        self._requests_before: dict = {}  # request id -> request, of the output being applied (finished ones vanish)
        self._times = (0.0, 0.0, 0.0)  # latest step's (schedule, execute, update) ms
        self._referenced: set[int] | None = None  # blocks in any table at the latest event (None: unknown)
        self._added: list[RequestAdded] = []  # since the latest event
        self._ended: dict[str, RequestEnd] = {}
        self._preempted: list[Preemption] = []

    # ---- hooks (the scheduler subclasses call these through `call`) -----------------------------

    def call(self, hook, *args) -> None:
        """Run a hook; the first exception switches the probe off for good (logged once), vLLM goes on."""
        try:
            hook(*args)
        except Exception:
            self.enabled = False
            log.exception("enginetui probe: internal error; the probe is off from now on (vLLM keeps serving)")
            self.close()

    def before_schedule(self, s) -> None:
        self.poll_subscribers()
        if self._plan is not None:  # the previous busy-loop step only planned
            self._finish_step(s, 0, [])
        self._sched_start = (time.time(), time.perf_counter())
        self._running_before = {r.request_id for r in s.running} if self.subscribers else None

    def after_schedule(self, s, out) -> None:
        wall, now = time.time(), time.perf_counter()
        step = s.current_step
        self._in_flight[id(out)] = (step, wall)
        for new in out.scheduled_new_reqs:
            request = s.requests.get(new.req_id)
            if request is not None and request.num_preemptions == 0 and new.req_id not in self._admission:
                self._admission[new.req_id] = (new.num_computed_tokens, wall)
        plan = _Plan(step, (now - self._sched_start[1]) * 1e3, StepPhase(step, "schedule", self._sched_start[0], wall))
        if self._running_before is not None:
            self._describe_plan(s, out, plan, self._running_before)
        self._plan = plan

    def before_update(self, s, out) -> None:
        self._update_start = (time.time(), time.perf_counter())
        if self.subscribers:
            self._requests_before = {req_id: s.requests.get(req_id) for req_id in out.num_scheduled_tokens}

    def after_update(self, s, out, engine_outputs: dict) -> None:
        wall, now = time.time(), time.perf_counter()
        executed, sched_end = self._in_flight.pop(id(out), (0, self._update_start[0]))
        new_tokens: dict[str, list[int]] = {}
        for outputs in engine_outputs.values():
            stats = outputs.scheduler_stats
            if stats is not None and stats.prefix_cache_stats is not None:
                self.prefix_cache_queries += stats.prefix_cache_stats.queries
                self.prefix_cache_hits += stats.prefix_cache_stats.hits
            for o in outputs.outputs:
                self.total_output_tokens += len(o.new_token_ids)
                if not self.subscribers:
                    continue
                if o.new_token_ids:
                    new_tokens[o.request_id] = list(o.new_token_ids)
                if o.finish_reason is not None:
                    request = self._requests_before.get(o.request_id)
                    self._ended[o.request_id] = RequestEnd(
                        o.request_id,
                        str(o.finish_reason),
                        _stop_detail(str(o.finish_reason), o.stop_reason, request),
                        request.num_output_tokens if request is not None else 0,
                    )
        self._requests_before = {}
        phases = [
            StepPhase(executed, "execute", sched_end, self._update_start[0]),
            StepPhase(executed, "update", self._update_start[0], wall),
        ]
        exec_ms = max(0.0, (self._update_start[0] - sched_end) * 1e3)
        self._finish_step(s, executed, phases, new_tokens, exec_ms, (now - self._update_start[1]) * 1e3)
        if len(self._admission) > 2 * len(s.requests) + 64:  # forget requests that left
            self._admission = {k: v for k, v in self._admission.items() if k in s.requests}

    def after_add(self, s, request, is_new: bool) -> None:
        if is_new and (self.subscribers or self.poll_subscribers()):
            self._added.append(
                RequestAdded(
                    request.request_id,
                    list(request.prompt_token_ids or ()),
                    _sampling_params(request),
                    request.max_tokens,
                    request.priority,
                    request.arrival_time,
                )
            )

    def after_finish(self, s, requests: list) -> None:
        """Requests ended from outside a step (aborts) or for errors."""
        if self.subscribers:
            for r in requests:
                reason = r.get_finished_reason()
                self._ended[r.request_id] = RequestEnd(
                    r.request_id,
                    str(reason) if reason is not None else "abort",
                    _END_DETAILS.get(r.status.name, r.status.name.lower()),
                    r.num_output_tokens,
                )

    def before_preempt(self, s, request) -> None:
        self.total_preemptions += 1
        if self.subscribers:
            blocks = _tables(s).get(request.request_id, ())
            self._preempted.append(Preemption(request.request_id, request.num_computed_tokens, len(blocks)))

    def after_reset_prefix_cache(self, s) -> None:
        """A reset changes the pool between steps (and vLLM may stay idle after it): say so now."""
        self.poll_subscribers()
        if self.subscribers:
            self._publish(self._build(s, "update", None, 0, [], {}))

    # ---- subscribers and publishing ----------------------------------------------------------

    def poll_subscribers(self) -> int:
        """Take in joins and leaves (never blocks); the number listening now."""
        sock = self._publisher.sock
        while True:
            try:
                msg = sock.recv(zmq.NOBLOCK)
            except zmq.Again:
                return self.subscribers
            if msg[:1] == b"\x01":
                if not self.subscribers:
                    self._referenced = None  # nothing was tracked meanwhile: no block deltas in the next event
                self.subscribers += 1
            elif msg[:1] == b"\x00":
                self.subscribers = max(0, self.subscribers - 1)

    def close(self) -> None:
        try:
            self._publisher.close()
        except Exception:  # closing must never raise into vLLM
            pass

    def _finish_step(
        self,
        s,
        executed: int,
        phases: list[StepPhase],
        new_tokens: dict | None = None,
        exec_ms: float = 0.0,
        update_ms: float = 0.0,
    ) -> None:
        """The end of one busy-loop step: the held plan (if any) and the applied step `executed` (0: none)."""
        plan, self._plan = self._plan, None
        self.step_count += 1
        self._times = (plan.sched_ms if plan else 0.0, exec_ms, update_ms)
        if plan is not None:
            phases = [plan.phase, *phases]
        if not self.subscribers:
            self._added, self._ended, self._preempted = [], {}, []
            self._referenced = None
            return
        self._publish(self._build(s, "step", plan, executed, phases, new_tokens or {}))

    def _publish(self, event: StepEvent) -> None:
        try:
            self._publisher.publish(event)
        except zmq.Again:
            self.dropped += 1

    # ---- reading vLLM ------------------------------------------------------------------------

    def _describe_plan(self, s, out, plan: _Plan, running_before: set[str]) -> None:
        """What this schedule() did: tokens per request, prefill or decode, split prefills, admissions, the
        step's shape."""
        spec = out.scheduled_spec_decode_tokens
        sampled_per_step = getattr(s, "num_sampled_tokens_per_step", 1)
        num_sampled = decode_context = prefill_kv = pairs = 0
        for req_id, n in out.num_scheduled_tokens.items():
            r = s.requests[req_id]
            num_spec = len(spec.get(req_id, ()))
            after = r.num_computed_tokens
            before = after - n
            placeholders = r.num_output_placeholders
            if self.async_class and not r.is_prefill_chunk:  # AsyncScheduler added this step's placeholders
                placeholders -= sampled_per_step + num_spec
            known = r.num_tokens + placeholders  # known tokens and tokens being sampled by earlier steps
            is_decode = n - num_spec == 1 and r.num_output_tokens + placeholders > 0 and before == known - 1
            if is_decode:
                plan.num_decode_tokens += n
                decode_context += after
            else:
                plan.num_prefill_tokens += n
                prefill_kv += after
                pairs += n * before + n * (n + 1) // 2
            remaining = max(0, known - after)
            if remaining == 0:
                num_sampled += 1
            if remaining > 0 or (before > self._admission.get(req_id, (0, 0.0))[0] and not is_decode):
                plan.chunks.append(PrefillChunk(req_id, n, remaining))
            if req_id not in running_before:
                plan.admitted.append(Admission(req_id, n, before, r.num_preemptions > 0))
        plan.scheduled = dict(out.num_scheduled_tokens)
        plan.shape = StepShape(
            plan.step,
            len(plan.scheduled),
            plan.num_prefill_tokens,
            plan.num_decode_tokens,
            num_sampled,
            decode_context,
            prefill_kv,
            pairs,
        )

    def _build(
        self, s, kind: str, plan: _Plan | None, executed: int, phases: list[StepPhase], new_tokens: dict[str, list[int]]
    ) -> StepEvent:
        tables = _tables(s)
        pool = s.kv_cache_manager.block_pool
        admission = self._admission

        def progress(r) -> RequestProgress:
            blocks = tables.get(r.request_id)
            first = admission.get(r.request_id)
            name = r.status.name
            return RequestProgress(
                req_id=r.request_id,
                status="running" if name == "RUNNING" else "preempted" if name == "PREEMPTED" else "waiting",
                num_prompt_tokens=r.num_prompt_tokens,
                num_computed_tokens=r.num_computed_tokens,
                num_tokens=r.num_tokens,
                num_output_tokens=r.num_output_tokens,
                max_tokens=r.max_tokens,
                num_cached_tokens=first[0] if first else 0,
                num_preemptions=r.num_preemptions,
                priority=r.priority,
                arrival_time=r.arrival_time,
                block_ids=[b.block_id - 1 for b in blocks] if blocks else [],
                first_scheduled_time=first[1] if first else None,
                num_output_placeholders=r.num_output_placeholders,
            )

        running = [progress(r) for r in s.running]
        waiting = [progress(r) for r in (*getattr(s, "kv_holding_waiting", ()), *s.waiting)]
        referenced = {b.block_id - 1 for blocks in tables.values() for b in blocks if not b.is_null}
        previous, self._referenced = self._referenced, referenced
        shared = sorted(
            {b.block_id - 1 for r in s.running for b in tables.get(r.request_id, ()) if b.ref_cnt > 1 and not b.is_null}
        )
        cached_free = []
        if pool.num_gpu_blocks <= CACHED_SCAN_MAX_BLOCKS:
            cached_free = [
                b.block_id - 1 for b in pool.blocks if b.ref_cnt == 0 and b.block_hash is not None and not b.is_null
            ]
        sched_ms, exec_ms, update_ms = self._times
        added, self._added = self._added, []
        ended, self._ended = list(self._ended.values()), {}
        preempted, self._preempted = self._preempted, []
        pause = getattr(s, "_pause_state", None)
        self.seq += 1
        return StepEvent(
            version=SCHEMA_VERSION,
            seq=self.seq,
            kind=kind,
            step=self.step_count,
            time=time.time(),
            paused=pause is not None and pause.name != "UNPAUSED",
            sched_ms=sched_ms,
            exec_ms=exec_ms,
            update_ms=update_ms,
            token_budget=getattr(s, "max_num_scheduled_tokens", s.scheduler_config.max_num_batched_tokens),
            max_num_seqs=s.max_num_running_reqs,
            num_scheduled_tokens=sum(plan.scheduled.values()) if plan else 0,
            num_prefill_tokens=plan.num_prefill_tokens if plan else 0,
            num_decode_tokens=plan.num_decode_tokens if plan else 0,
            scheduled=plan.scheduled if plan else {},
            added=added,
            admitted=plan.admitted if plan else [],
            chunks=plan.chunks if plan else [],
            new_token_ids=new_tokens,
            running=running,
            waiting=waiting,
            num_blocks=pool.num_gpu_blocks - 1,
            block_size=s.block_size,
            num_free_blocks=pool.get_num_free_blocks(),
            num_cached_free_blocks=len(cached_free),
            shared_blocks=shared,
            cached_free_blocks=cached_free,
            blocks_allocated=sorted(referenced - previous) if previous is not None else [],
            blocks_freed=sorted(previous - referenced) if previous is not None else [],
            preempted=preempted,
            finished=ended,
            rejected=[],
            prefix_cache_queries=self.prefix_cache_queries,
            prefix_cache_hits=self.prefix_cache_hits,
            num_dropped_events=0,
            total_output_tokens=self.total_output_tokens,
            total_preemptions=self.total_preemptions,
            step_interval_ms=0.0,
            async_scheduling=bool(s.scheduler_config.async_scheduling),
            planned_step=plan.step if plan else 0,
            executed_step=executed,
            phases=phases,
            shape=plan.shape if plan else StepShape(),
        )


def _tables(s) -> dict:
    """request id -> its blocks (vLLM's KVCacheBlock objects) in the first KV cache group."""
    return s.kv_cache_manager.coordinator.single_type_managers[0].req_to_blocks


def _stop_detail(reason: str, stop_reason, request) -> str:
    if reason == "stop":
        if isinstance(stop_reason, int):
            return f"stop token {stop_reason}"
        return f"stop string {stop_reason!r}" if stop_reason is not None else "EOS token"
    if reason == "length" and request is not None:
        return (
            f"max_tokens ({request.max_tokens}) reached"
            if request.num_output_tokens >= request.max_tokens
            else "max_model_len reached"
        )
    return _END_DETAILS.get(request.status.name, reason) if request is not None else reason


def _sampling_params(request) -> SamplingParams:
    """vLLM's sampling parameters in ours (the fields both have); the max_tokens alone where ours refuse them."""
    p = request.sampling_params
    if p is None:
        return SamplingParams(max_tokens=request.max_tokens)
    try:
        return SamplingParams(
            temperature=p.temperature,
            top_p=p.top_p,
            top_k=p.top_k,
            min_p=p.min_p,
            seed=p.seed,
            presence_penalty=p.presence_penalty,
            frequency_penalty=p.frequency_penalty,
            repetition_penalty=p.repetition_penalty,
            max_tokens=request.max_tokens,
            min_tokens=p.min_tokens,
            stop=list(p.stop) if p.stop else None,
            stop_token_ids=list(p.stop_token_ids or ()) or None,
            ignore_eos=p.ignore_eos,
            logprobs=p.logprobs,
        )
    except (ValueError, TypeError, msgspec.ValidationError):
        return SamplingParams(max_tokens=request.max_tokens)
