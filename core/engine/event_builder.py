"""The StepEvent built from the scheduler's state: the one place an event's fields are filled.

EngineCore (core/engine/core.py) builds a live engine's events here; the simulator
(enginetui/simulate/event_sinks.py) builds a simulated run's here too, so both describe a step
the same way.
"""

from dataclasses import dataclass

from enginetui.core.config import EngineConfig
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
from enginetui.core.request import Request
from enginetui.core.sched.scheduler import Scheduler
from enginetui.core.sched.step_record import Chunk, Ended, StepRecord
from enginetui.core.sched.step_shape import StepShape


@dataclass(slots=True)
class StepTimes:
    """Where one step's time went, in ms."""

    sched_ms: float = 0.0  # in scheduler.schedule()
    exec_ms: float = 0.0  # in the model runner (prepare + forward + sampling)
    update_ms: float = 0.0  # in scheduler.update_from_output()
    forward_ms: float = 0.0  # model forward + lm_head (part of exec_ms)
    sample_ms: float = 0.0  # sampling (part of exec_ms)
    compute_threads: int = 0  # CPU threads the model ran on (0: not on a CPU, or not a model's step)
    cuda_graph_size: int = 0  # the captured decode size its forward replayed (0: ran eagerly)


@dataclass(slots=True)
class StepSummary:
    """The latest step as its events describe it (update and snapshot events repeat it)."""

    scheduled: dict[str, int]  # request id -> tokens scheduled
    num_prefill_tokens: int  # of which prompt or recompute work
    num_decode_tokens: int  # of which one-token decodes
    chunks: list[Chunk]  # split prefills it scheduled
    times: StepTimes  # where its time went
    shape: StepShape  # its work, as the step-time models price it

    @classmethod
    def of(cls, record: StepRecord, times: StepTimes) -> "StepSummary":
        """The plan a step record carries, with the step's times."""
        return cls(
            record.scheduled, record.num_prefill_tokens, record.num_decode_tokens, record.chunks, times, record.shape
        )


@dataclass(slots=True)
class StepWork:
    """Which steps one busy-loop step planned and applied (with async scheduling, two different ones)."""

    planned_step: int  # the plan made (0: none)
    executed_step: int  # the step whose outputs were applied (0: none)
    phases: list[StepPhase]  # wall-clock spans of its schedule / execute / update


@dataclass(slots=True)
class EngineTotals:
    """Engine-wide figures an event carries beside the step itself."""

    seq: int  # the event's sequence number
    step: int  # busy-loop steps taken
    time: float  # when the event was built (wall clock, or the simulated clock)
    paused: bool  # only single steps run
    total_output_tokens: int  # tokens generated so far
    total_preemptions: int  # preemptions so far
    step_interval_ms: float  # slow motion's minimum time between steps
    async_scheduling: bool  # plans step N+1 while N executes


def build_step_event(
    kind: str,
    totals: EngineTotals,
    config: EngineConfig,
    scheduler: Scheduler,
    record: StepRecord,
    latest: StepSummary,
    added: list[RequestAdded],
    new_tokens: dict[str, list[int]],
    work: StepWork,
    first_scheduled: dict[str, float] | None = None,
) -> StepEvent:
    """One event: `record` is what happened since the previous event; the plan and times are `latest`'s
    (a step event's own; updates and snapshots repeat the latest step's, without its chunks).
    `first_scheduled` overrides the requests' own first-scheduled times (the simulator's clock)."""
    times = latest.times
    kv = scheduler.kv_state()

    def progress(r: Request) -> RequestProgress:
        first = r.first_scheduled_time if first_scheduled is None else first_scheduled.get(r.request_id)
        return RequestProgress(
            req_id=r.request_id,
            status=r.status.value,
            num_prompt_tokens=r.num_prompt_tokens,
            num_computed_tokens=r.num_computed_tokens,
            num_tokens=r.num_tokens,
            num_output_tokens=r.num_output_tokens,
            max_tokens=r.max_tokens,
            num_cached_tokens=r.num_cached_tokens,
            num_preemptions=r.num_preemptions,
            priority=r.priority,
            arrival_time=r.arrival_time,
            block_ids=scheduler.block_ids(r.request_id),
            first_scheduled_time=first,
            num_output_placeholders=r.num_output_placeholders,
        )

    return StepEvent(
        version=SCHEMA_VERSION,
        seq=totals.seq,
        kind=kind,
        step=totals.step,
        time=totals.time,
        paused=totals.paused,
        sched_ms=times.sched_ms,
        exec_ms=times.exec_ms,
        update_ms=times.update_ms,
        token_budget=config.max_num_batched_tokens,
        max_num_seqs=config.max_num_seqs,
        num_scheduled_tokens=sum(latest.scheduled.values()),
        num_prefill_tokens=latest.num_prefill_tokens,
        num_decode_tokens=latest.num_decode_tokens,
        scheduled=latest.scheduled,
        added=added,
        admitted=[Admission(a.req_id, a.num_new_tokens, a.num_cached_tokens, a.resumed) for a in record.admitted],
        chunks=[PrefillChunk(c.req_id, c.num_tokens, c.num_remaining) for c in latest.chunks] if kind == "step" else [],
        new_token_ids=new_tokens,
        running=[progress(r) for r in scheduler.running],
        waiting=[progress(r) for r in scheduler.waiting],
        num_blocks=kv.num_blocks,
        block_size=config.block_size,
        num_free_blocks=kv.num_free_blocks,
        num_cached_free_blocks=len(kv.cached_free_blocks),
        shared_blocks=kv.shared_blocks,
        cached_free_blocks=kv.cached_free_blocks,
        blocks_allocated=record.blocks_allocated,
        blocks_freed=record.blocks_freed,
        preempted=[Preemption(p.req_id, p.lost_tokens, p.freed_blocks) for p in record.preempted],
        finished=[_end(e) for e in record.finished],
        rejected=[_end(e) for e in record.rejected],
        prefix_cache_queries=kv.prefix_cache_queries,
        prefix_cache_hits=kv.prefix_cache_hits,
        num_dropped_events=0,
        total_output_tokens=totals.total_output_tokens,
        total_preemptions=totals.total_preemptions,
        step_interval_ms=totals.step_interval_ms,
        forward_ms=times.forward_ms,
        sample_ms=times.sample_ms,
        compute_threads=times.compute_threads,
        cuda_graph_size=times.cuda_graph_size,
        async_scheduling=totals.async_scheduling,
        planned_step=work.planned_step,
        executed_step=work.executed_step,
        phases=work.phases,
        shape=latest.shape,
    )


def _end(e: Ended) -> RequestEnd:
    return RequestEnd(e.req_id, e.reason, e.detail, e.num_output_tokens)
