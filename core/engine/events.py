"""The step event: a subscriber's only view of the engine, and a recording's unit.

EngineCore publishes an event whenever its state changes: one per engine step (kind "step"),
one as soon as something changes between steps (kind "update": requests added, aborted or
rejected, pause / resume, a prefix-cache reset, a new pace), and a full one for each new
subscriber or on request (kind "snapshot"). Each carries the whole state it left behind (queues,
block tables, pool) and what happened since the previous event (requests added with their
prompt token ids, admissions, prefill chunks, new token ids, preemptions, ends), so a viewer
folds events and never infers by diffing. It is a versioned msgspec schema: bump
`SCHEMA_VERSION` on any incompatible change. Events carry ids and counts; text is assembled
by whoever holds the tokenizer.
"""

import msgspec

from enginetui.core.sampling_params import SamplingParams
from enginetui.core.sched.step_shape import StepShape

SCHEMA_VERSION = 3


class RequestProgress(msgspec.Struct, frozen=True):
    """One live request as the scheduler holds it at the end of a step."""

    req_id: str  # client-visible request id
    status: str  # "waiting" | "running" | "preempted" (preempted = waiting after losing its KV)
    num_prompt_tokens: int  # prompt length in tokens
    num_computed_tokens: int  # tokens whose KV is in the cache
    num_tokens: int  # prompt + generated tokens so far
    num_output_tokens: int  # generated tokens so far
    max_tokens: int  # generation limit of this request
    num_cached_tokens: int  # prompt tokens served from the prefix cache at admission
    num_preemptions: int  # how many times this request has been preempted
    priority: int  # scheduling priority (lower runs first under the priority policy)
    arrival_time: float  # wall-clock time the engine received it (time.time())
    block_ids: list[int]  # block table: logical block i -> physical block block_ids[i]
    first_scheduled_time: float | None = None  # wall-clock time of its first admission (None while never run)
    num_output_placeholders: int = 0  # async scheduling: tokens being sampled by steps in flight (not yet known)


class RequestAdded(msgspec.Struct, frozen=True):
    """A request that entered the engine (queued, or rejected at once: see `rejected`)."""

    req_id: str  # client-visible request id
    prompt_token_ids: list[int]  # the tokenized prompt
    sampling_params: SamplingParams  # how it samples and when it stops
    max_tokens: int  # generation limit, resolved against max_model_len
    priority: int  # scheduling priority (lower runs first under the priority policy)
    arrival_time: float  # wall-clock time the engine received it (time.time())
    routed: str = ""  # a simulated fleet: why its router sent it to this replica ("" elsewhere)


class Admission(msgspec.Struct, frozen=True):
    """A waiting request the scheduler moved to running this step."""

    req_id: str  # the request
    num_new_tokens: int  # tokens scheduled for it this step
    num_cached_tokens: int  # prompt tokens served from the prefix cache (not computed)
    resumed: bool  # True when it was preempted before: its KV is being recomputed


class PrefillChunk(msgspec.Struct, frozen=True):
    """A request whose prompt (or recompute) work was split: part of it ran this step, some is left."""

    req_id: str  # the request
    num_tokens: int  # prefill tokens computed this step
    num_remaining: int  # prefill tokens still to compute after this step


class Preemption(msgspec.Struct, frozen=True):
    """A request preempted by recompute during this step."""

    req_id: str  # the victim
    lost_tokens: int  # computed tokens whose KV was dropped and must be recomputed
    freed_blocks: int  # blocks returned to the pool


class RequestEnd(msgspec.Struct, frozen=True):
    """A request that left the engine this step (finished, aborted or rejected)."""

    req_id: str  # the request
    reason: str  # "stop" | "length" | "abort" | "error" | "rejected"
    detail: str  # human-readable cause ("max_tokens reached", "prompt needs 90 blocks > pool 64", ...)
    num_output_tokens: int  # tokens it generated


class StepPhase(msgspec.Struct, frozen=True):
    """One stage of one engine step, as a wall-clock span (with async scheduling the schedule of step
    N+1 and the execution of step N overlap)."""

    step: int  # the step it belongs to (its planned_step number)
    name: str  # "schedule" | "execute" | "update"
    start: float  # time.time() when it began
    end: float  # time.time() when it ended


class StepEvent(msgspec.Struct, frozen=True):
    """What happened since the previous event, and the state it left behind."""

    version: int  # SCHEMA_VERSION of the publisher
    seq: int  # publisher's event counter: +1 per published event (snapshot replies repeat the latest)
    kind: str  # "step" | "update" (a change between steps) | "snapshot" (full state, nothing new)
    step: int  # engine step counter (1 for the first step; updates and snapshots repeat the latest)
    time: float  # wall-clock time the event was built (time.time())
    paused: bool  # engine is paused (only single-steps run)
    sched_ms: float  # latest step: time in scheduler.schedule()
    exec_ms: float  # latest step: time in model_runner.execute() (prepare + forward + sampling)
    update_ms: float  # latest step: time in scheduler.update_from_output()
    token_budget: int  # max_num_batched_tokens
    max_num_seqs: int  # limit on running requests
    num_scheduled_tokens: int  # tokens computed this step
    num_prefill_tokens: int  # of which prompt (or recompute) tokens
    num_decode_tokens: int  # of which one-token decode steps
    scheduled: dict[str, int]  # req_id -> tokens scheduled this step
    added: list[RequestAdded]  # requests that entered the engine since the previous event
    admitted: list[Admission]  # requests moved from waiting to running this step
    chunks: list[PrefillChunk]  # split prefills: computed this step, still unfinished
    new_token_ids: dict[str, list[int]]  # req_id -> tokens it generated this step
    running: list[RequestProgress]  # running queue in scheduler order
    waiting: list[RequestProgress]  # waiting queue in scheduler order (head first)
    num_blocks: int  # KV pool size in blocks
    block_size: int  # tokens per block
    num_free_blocks: int  # blocks no request references (includes cached-free ones)
    num_cached_free_blocks: int  # free blocks still holding a reusable prefix (prefix caching)
    shared_blocks: list[int]  # blocks referenced by more than one request
    cached_free_blocks: list[int]  # free blocks that still hold a cached prefix
    blocks_allocated: list[int]  # blocks newly handed to requests this step
    blocks_freed: list[int]  # blocks whose last reference was dropped this step
    preempted: list[Preemption]  # preemptions this step
    finished: list[RequestEnd]  # requests that finished, were aborted or failed since the previous event
    rejected: list[RequestEnd]  # requests refused at admission since the previous event
    prefix_cache_queries: int  # total prompt tokens looked up in the prefix cache so far
    prefix_cache_hits: int  # of which found in the cache
    num_dropped_events: int  # events this subscriber missed just before this one (MissedEvents sets it)
    total_output_tokens: int  # tokens generated since the engine started
    total_preemptions: int  # preemptions since the engine started
    step_interval_ms: float  # slow motion: the least time between step starts (0 = full speed)
    forward_ms: float = 0.0  # latest step: model forward + lm_head (part of exec_ms)
    sample_ms: float = 0.0  # latest step: sampling (part of exec_ms)
    compute_threads: int = 0  # latest step: CPU threads the model ran on (0: no model step on a CPU)
    async_scheduling: bool = False  # the engine plans step N+1 while step N executes (vLLM's --async-scheduling)
    planned_step: int = 0  # the step whose plan `scheduled` is (0: nothing planned by this busy-loop step)
    executed_step: int = 0  # the step whose outputs (new_token_ids, finished) this event applies (0: none)
    phases: list[StepPhase] = []  # this busy-loop step's schedule / execute / update spans, by step
    cuda_graph_size: int = 0  # latest step: the captured decode size its forward replayed (0: ran eagerly)
    replica: int = 0  # a simulated fleet's recording: the replica whose step it is (0: the only engine)
    shape: StepShape | None = None  # the latest planned step's work, as step-time models price it (None: not recorded)

    @property
    def is_snapshot(self) -> bool:
        return self.kind == "snapshot"

    @property
    def is_step(self) -> bool:
        return self.kind == "step"


def as_snapshot(event: StepEvent) -> StepEvent:
    """The state `event` left behind as a "snapshot" (what a dashboard engine that relays events answers when
    asked again): the same queues, pool and latest step, without the requests' news. The step's block changes,
    plan numbers and phases stay, so a first picture still marks the blocks that step allocated and freed."""
    return msgspec.structs.replace(
        event,
        kind="snapshot",
        added=[],
        admitted=[],
        chunks=[],
        new_token_ids={},
        preempted=[],
        finished=[],
        rejected=[],
        num_dropped_events=0,
    )


class MissedEvents:
    """A subscriber's own count of the events it did not get.

    Every published event carries the next `seq`, and a subscriber that falls behind loses
    events at its own full queue (the engine never waits, and other subscribers are
    unaffected). So a jump in `seq` is what this subscriber missed; `mark` writes it into the
    event's `num_dropped_events`. A snapshot fetched by a control call repeats the latest
    `seq` and only moves the mark forward.
    """

    def __init__(self) -> None:
        self.last_seq: int | None = None  # seq of the latest event seen
        self.total = 0  # events missed since the first one seen

    def mark(self, event: StepEvent) -> StepEvent:
        missed = 0
        if self.last_seq is not None:
            missed = max(0, event.seq - self.last_seq - 1)
        if self.last_seq is None or event.seq > self.last_seq:
            self.last_seq = event.seq
        self.total += missed
        if missed == event.num_dropped_events:
            return event
        return msgspec.structs.replace(event, num_dropped_events=missed)


def encode_event(event: StepEvent) -> bytes:
    return _ENCODER.encode(event)


def decode_event(data: bytes | memoryview) -> StepEvent:
    return _DECODER.decode(data)


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(StepEvent)
