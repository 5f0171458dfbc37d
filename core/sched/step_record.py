"""What the scheduler did, as plain data: EngineCore turns it into the dashboard's step event.

The scheduler knows nothing of events; it appends to one `StepRecord` as things happen (inside a
step, or between steps: aborts, rejections, errors) and hands it over on `drain_step_record()`.
"""

from dataclasses import dataclass, field


@dataclass(slots=True)
class Admitted:
    """A waiting request moved to running this step."""

    req_id: str  # the request
    num_new_tokens: int  # tokens scheduled for it this step (its first chunk)
    num_cached_tokens: int  # tokens served by the prefix cache at this admission
    resumed: bool  # True when re-admitted after a preemption (its KV is being recomputed)


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

    admitted: list[Admitted] = field(default_factory=list)  # waiting -> running moves
    preempted: list[Preempted] = field(default_factory=list)  # running -> waiting moves (KV dropped)
    finished: list[Ended] = field(default_factory=list)  # stop / length / abort / error endings
    rejected: list[Ended] = field(default_factory=list)  # requests refused at admission (reason "rejected")
