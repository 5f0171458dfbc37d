"""The step event: the dashboard's only view of the engine.

EngineCore publishes one `StepEvent` per engine step (and a full one on a snapshot request).
It is a versioned msgspec schema: bump `SCHEMA_VERSION` on any incompatible change.
Events carry ids and counts only; text is assembled on the client side.
"""

import msgspec

SCHEMA_VERSION = 1


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


class StepEvent(msgspec.Struct, frozen=True):
    """Everything one engine step did, and the state it left behind."""

    version: int  # SCHEMA_VERSION of the publisher
    step: int  # engine step counter (1 for the first step; snapshots repeat the last step's number)
    time: float  # wall-clock time at the end of the step (time.time())
    is_snapshot: bool  # True for a full-state reply to a snapshot request, not a step
    paused: bool  # engine is paused (only single-steps run)
    sched_ms: float  # time in scheduler.schedule()
    exec_ms: float  # time in model_runner.execute() (forward + sampling)
    update_ms: float  # time in scheduler.update_from_output()
    token_budget: int  # max_num_batched_tokens
    max_num_seqs: int  # limit on running requests
    num_scheduled_tokens: int  # tokens computed this step
    num_prefill_tokens: int  # of which prompt (or recompute) tokens
    num_decode_tokens: int  # of which one-token decode steps
    scheduled: dict[str, int]  # req_id -> tokens scheduled this step
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
    finished: list[RequestEnd]  # requests that finished or were aborted this step
    rejected: list[RequestEnd]  # requests refused at admission this step
    prefix_cache_queries: int  # total prompt tokens looked up in the prefix cache so far
    prefix_cache_hits: int  # of which found in the cache
    num_dropped_events: int  # step events this subscriber missed just before this one (MissedEvents sets it)
    total_output_tokens: int  # tokens generated since the engine started
    total_preemptions: int = 0  # preemptions since the engine started
    step_interval_ms: float = 0.0  # slow motion: the least time between step starts (0 = full speed)


class MissedEvents:
    """A subscriber's own count of the step events it did not get.

    Every engine step publishes exactly one event with the next step number, and a subscriber
    that falls behind loses events at its own full queue (the engine never waits, and other
    subscribers are unaffected). So a jump in step numbers is what this subscriber missed;
    `mark` writes it into the event's `num_dropped_events`. Snapshots repeat the latest step
    number and only move the mark forward.
    """

    def __init__(self) -> None:
        self.last_step: int | None = None  # step number of the latest event seen
        self.total = 0  # events missed since the first one seen

    def mark(self, event: StepEvent) -> StepEvent:
        missed = 0
        if not event.is_snapshot and self.last_step is not None:
            missed = max(0, event.step - self.last_step - 1)
        if self.last_step is None or event.step > self.last_step:
            self.last_step = event.step
        self.total += missed
        if missed == event.num_dropped_events:
            return event
        return msgspec.structs.replace(event, num_dropped_events=missed)


def encode_event(event: StepEvent) -> bytes:
    return _ENCODER.encode(event)


def decode_event(data: bytes) -> StepEvent:
    return _DECODER.decode(data)


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(StepEvent)
