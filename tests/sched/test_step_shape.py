"""A step's shape (core/sched/step_shape.py): made by the scheduler with each plan and carried by the step
event, checked on random scheduler traces against the shape worked out from the requests around schedule()."""

from collections import Counter

from enginetui.core.engine.event_builder import EngineTotals, StepSummary, StepTimes, StepWork, build_step_event
from enginetui.core.engine.events import decode_event, encode_event
from enginetui.core.request import Request
from enginetui.core.sched.output import SchedulerOutput, sampling_ids
from enginetui.core.sched.scheduler import Scheduler
from enginetui.core.sched.step_shape import StepShape
from tests.sched.traces import random_trace, run_ours

NUM_TRACES = 80
NUM_ASYNC_TRACES = 40


def worked_out(
    step: int, out: SchedulerOutput, requests: dict[str, Request], known: dict[str, tuple[int, int]]
) -> tuple[StepShape, list[str]]:
    """The plan's shape from the requests after schedule() and `known` (request id -> tokens known or being
    sampled, and of them generated, before it); and the requests that sample."""
    prefill = decode = sampled = context = kv = pairs = 0
    samplers = []
    for req_id, n in out.num_scheduled_tokens.items():
        after = requests[req_id].num_computed_tokens
        before = after - n
        num_tokens, num_generated = known[req_id]
        if n == 1 and num_generated and before == num_tokens - 1:  # the one token left of a generating request
            decode += 1
            context += after
        else:
            prefill += n
            kv += after
            pairs += sum(before + i + 1 for i in range(n))  # each query attends to the keys up to itself
        if after == num_tokens:
            sampled += 1
            samplers.append(req_id)
    return StepShape(step, len(out.num_scheduled_tokens), prefill, decode, sampled, context, kv, pairs), samplers


class ShapeChecking(Scheduler):
    """The scheduler, each plan's shape, and the step event built from it, checked as the trace runs."""

    seen: Counter = Counter()  # what the checked plans held, over all traces

    def schedule(self) -> SchedulerOutput:
        known = {
            r.request_id: (r.num_tokens + r.num_output_placeholders, r.num_output_tokens + r.num_output_placeholders)
            for r in self.requests.values()
        }
        out = super().schedule()
        want, samplers = worked_out(self.num_plans, out, self.requests, known)
        assert out.shape == want
        assert sampling_ids(out, self.requests) == samplers  # what the simulator and the rebuild sample
        record = self.drain_step_record()
        totals = EngineTotals(want.step, want.step, 0.0, False, 0, 0, 0.0, self.async_scheduling)
        event = build_step_event(
            "step", totals, self.config, self, record, StepSummary.of(record, StepTimes()), [], {}, StepWork(0, 0, [])
        )
        assert decode_event(encode_event(event)).shape == want
        seen = ShapeChecking.seen
        seen["steps"] += 1
        seen["decodes"] += want.num_decode_tokens
        seen["prefill pairs"] += want.prefill_attention_pairs > 0
        seen["sampled"] += want.num_sampled
        seen["async samplers behind placeholders"] += sum(
            1 for req_id in samplers if self.requests[req_id].num_output_placeholders > 1
        )
        return out


def test_each_plan_and_its_event_carry_the_shape_of_the_step():
    ShapeChecking.seen.clear()
    traces = [random_trace(seed) for seed in range(NUM_TRACES)]
    traces += [random_trace(seed, async_scheduling=True) for seed in range(NUM_ASYNC_TRACES)]
    for trace in traces:
        run_ours(trace, ShapeChecking)
    seen = ShapeChecking.seen
    assert seen["steps"] > 3000 and seen["decodes"] > 2500 and seen["prefill pairs"] > 1000, seen
    assert seen["async samplers behind placeholders"] > 500, seen
