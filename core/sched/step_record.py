"""What the scheduler did, as plain data: EngineCore turns it into the dashboard's step event.

The scheduler knows nothing of events; it appends to one `StepRecord` as things happen (inside a
step, or between steps: aborts, rejections, errors) and hands it over on `drain_step_record()`.
The record says everything an event needs about the step (what was scheduled and why, who moved,
which blocks changed hands), so nobody outside the scheduler re-derives it. `KVState` is the
pool's state at the moment it is asked for.
"""

from dataclasses import dataclass, field

from enginetui.core.sched.step_shape import StepShape


@dataclass(slots=True)
class Admitted:
    """A waiting request moved to running this step."""

    req_id: str  # the request
    num_new_tokens: int  # tokens scheduled for it this step (its first chunk)
    num_cached_tokens: int  # tokens served by the prefix cache at this admission
    resumed: bool  # True when re-admitted after a preemption (its KV is being recomputed)


@dataclass(slots=True)
class Chunk:
    """A request whose prefill (or recompute) is split over steps: this step's piece and what is left."""

    req_id: str  # the request
    num_tokens: int  # prefill tokens scheduled for it this step
    num_remaining: int  # prefill tokens still to compute after this step


@dataclass(slots=True)
class Preempted:
    """A running request preempted by recompute."""

    req_id: str  # the victim
    lost_tokens: int  # computed tokens whose KV was dropped and must be recomputed
    freed_blocks: int  # blocks it held (returned to the pool unless shared)


@dataclass(slots=True)
class Ended:
    """A request that left the engine: finished, aborted, failed or refused."""

    req_id: str  # the request
    reason: str  # "stop" | "length" | "abort" | "error" | "rejected"
    detail: str  # human-readable cause ("max_tokens (16) reached", "EOS token", ...)
    num_output_tokens: int  # tokens it generated


@dataclass(slots=True)
class StepRecord:
    """Everything recorded since the last drain, in the order it happened."""

    scheduled: dict[str, int] = field(default_factory=dict)  # request id -> tokens scheduled, in scheduling order
    num_prefill_tokens: int = 0  # of the scheduled tokens, prompt or recompute work
    num_decode_tokens: int = 0  # of the scheduled tokens, one-token steps that each generate the next token
    admitted: list[Admitted] = field(default_factory=list)  # waiting -> running moves
    chunks: list[Chunk] = field(default_factory=list)  # split prefills scheduled this step
    decodes: list[str] = field(default_factory=list)  # requests scheduled for one decode token, in order
    shape: StepShape = StepShape()  # the latest plan's work (step 0: none planned since the last drain)
    preempted: list[Preempted] = field(default_factory=list)  # running -> waiting moves (KV dropped)
    finished: list[Ended] = field(default_factory=list)  # stop / length / abort / error endings
    rejected: list[Ended] = field(default_factory=list)  # requests refused at admission (reason "rejected")
    blocks_allocated: list[int] = field(default_factory=list)  # blocks handed to requests, in order (set at drain)
    blocks_freed: list[int] = field(default_factory=list)  # blocks whose last reference was dropped (set at drain)


@dataclass(slots=True)
class KVState:
    """The KV pool as it stands now."""

    num_blocks: int  # pool size in blocks
    num_free_blocks: int  # blocks no request references (cached-free ones included)
    shared_blocks: list[int]  # sorted ids of blocks referenced by more than one running request
    cached_free_blocks: list[int]  # free blocks still holding a findable prefix
    prefix_cache_queries: int  # prompt tokens looked up in the prefix cache so far
    prefix_cache_hits: int  # of which found
