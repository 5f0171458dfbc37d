"""What a step computes, as the step-time models see it: the scheduler's `StepShape` of its plan
(core/sched/output.py; step events carry the same), numbered by the simulator's own steps."""

import msgspec

from enginetui.core.request import Request
from enginetui.core.sched.output import SchedulerOutput
from enginetui.core.sched.step_shape import StepShape

__all__ = ["StepShape", "step_shape"]


def step_shape(
    step: int, output: SchedulerOutput, requests: dict[str, Request], sampling: list[str] | None = None
) -> StepShape:
    """The shape of the step `output` plans, as step number `step`; `requests` maps ids to the scheduler's
    requests. The ids of the requests that sample this step are appended to `sampling` when given."""
    if sampling is not None:
        sampling.extend(req_id for req_id in output.num_scheduled_tokens if not requests[req_id].is_prefill_chunk)
    shape = output.shape
    return shape if shape.step == step else msgspec.structs.replace(shape, step=step)
