"""Builders of step events, request progress and outputs for the dashboard's pure tests."""

from enginetui.core.engine.events import SCHEMA_VERSION, RequestProgress, StepEvent
from enginetui.core.outputs import CompletionOutput, RequestMetrics, RequestOutput

T0 = 1000.0


def progress(
    req_id: str,
    computed: int,
    tokens: int,
    *,
    prompt: int | None = None,
    status: str = "running",
    blocks=(),
    preemptions: int = 0,
) -> RequestProgress:
    prompt = tokens if prompt is None else prompt
    return RequestProgress(
        req_id=req_id, status=status, num_prompt_tokens=prompt, num_computed_tokens=computed,
        num_tokens=tokens, num_output_tokens=tokens - prompt, max_tokens=16, num_cached_tokens=0,
        num_preemptions=preemptions, priority=0, arrival_time=T0, block_ids=list(blocks),
    )  # fmt: skip


def event(
    step: int,
    *,
    running=(),
    waiting=(),
    scheduled=None,
    snapshot=False,
    total_out=0,
    free=8,
    kind=None,
    seq=None,
    **deltas,
) -> StepEvent:
    """A step event (or a snapshot / update); `seq` defaults to the step number."""
    kind = kind or ("snapshot" if snapshot else "step")
    return StepEvent(
        version=SCHEMA_VERSION, seq=step if seq is None else seq, kind=kind, step=step, time=T0 + 0.1 * step,
        paused=False,
        sched_ms=0.1, exec_ms=1.0, update_ms=0.1, token_budget=32, max_num_seqs=4,
        num_scheduled_tokens=sum((scheduled or {}).values()), num_prefill_tokens=0, num_decode_tokens=0,
        scheduled=scheduled or {}, added=deltas.get("added", []), admitted=deltas.get("admitted", []),
        chunks=deltas.get("chunks", []), new_token_ids=deltas.get("new_tokens", {}), running=list(running), waiting=list(waiting), num_blocks=8, block_size=16,
        num_free_blocks=free, num_cached_free_blocks=0, shared_blocks=[], cached_free_blocks=[],
        blocks_allocated=deltas.get("allocated", []), blocks_freed=deltas.get("freed", []),
        preempted=deltas.get("preempted", []), finished=deltas.get("finished", []),
        rejected=deltas.get("rejected", []), prefix_cache_queries=0, prefix_cache_hits=0,
        num_dropped_events=deltas.get("dropped", 0), total_output_tokens=total_out, total_preemptions=0,
        step_interval_ms=0.0,
    )  # fmt: skip


def output(
    req_id: str, text: str, n: int, reason: str | None = None, *, first_token: float | None = T0 + 0.2, error=None
) -> RequestOutput:
    """A cumulative output of `n` tokens; finished when `reason` is given."""
    metrics = RequestMetrics(
        arrival_time=T0, first_scheduled_time=T0 + 0.1, first_token_time=first_token,
        finished_time=T0 + 1.0 if reason else None,
    )  # fmt: skip
    completion = CompletionOutput(0, text, list(range(n)), reason, error=error)
    return RequestOutput(req_id, "p", [1, 2, 3], [completion], reason is not None, metrics)
