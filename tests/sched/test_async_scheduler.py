"""Asynchronous scheduling worked by hand: steps planned before the previous step's tokens are applied."""

import pytest

from enginetui.core.request import Request, RequestStatus
from enginetui.core.sampling_params import SamplingParams
from tests.sched.test_scheduler import make_request, make_scheduler


@pytest.mark.parametrize("async_scheduling", [False, True])
def test_preempt_during_execution(async_scheduling):
    """vLLM's tests/v1/core/test_scheduler.py::test_preempt_during_execution, ported: a request
    preempted while its step is in flight still receives that step's token. vLLM runs it with the
    synchronous scheduler and two batches in flight; with asynchronous scheduling the second plan
    also decodes the first request on a placeholder, so its prompt is one token shorter to leave
    room for the second request's five blocks."""
    s = make_scheduler(num_blocks=10, block_size=16, budget=100, enable_prefix_caching=False,
                       async_scheduling=async_scheduling)  # vLLM's 11 blocks less its null block
    a, b = make_request("0", 79 if async_scheduling else 80), make_request("1", 80)
    s.add_request(a)
    out0 = s.schedule()
    assert len(out0.num_scheduled_tokens) == 1 and len(out0.scheduled_new_reqs[0].block_ids) == 5
    s.add_request(b)  # scheduled while the first request's step is still running
    out1 = s.schedule()
    assert len(out1.num_scheduled_tokens) == 1 + async_scheduling and len(out1.scheduled_new_reqs[0].block_ids) == 5
    s.update_from_output(out0, {"0": 0})
    s.schedule()  # the first request needs a sixth block: the second is preempted, its step in flight
    assert s.running == [a] and b.status is RequestStatus.PREEMPTED
    s.update_from_output(out1, {"1": 42, "0": 1})
    assert b.output_token_ids == [42]  # the preempted request is updated with its sampled token
    assert b.num_output_placeholders == 0 and b.num_in_flight_tokens == 0 and b.num_stale_output_tokens == 0
    s.check_invariants()


def test_a_step_is_planned_on_placeholders_and_their_tokens_replace_them():
    s = make_scheduler(num_blocks=16, block_size=4, budget=64, async_scheduling=True)
    a = make_request("A", 5, max_tokens=4)
    s.add_request(a)
    out1 = s.schedule()  # the prompt; its first token is sampled by this step
    assert a.num_output_placeholders == 1 and a.num_computed_tokens == 5
    out2 = s.schedule()  # planned before step 1's token is known: it decodes the placeholder
    assert out2.num_scheduled_tokens == {"A": 1} and a.num_output_placeholders == 2
    assert s.drain_step_record().decodes == ["A"]
    assert out2.scheduled_cached_reqs.new_token_ids == [[]]  # the runner feeds the token it sampled itself
    s.update_from_output(out1, {"A": 10})
    assert a.output_token_ids == [10] and a.num_output_placeholders == 1
    out3 = s.schedule()
    s.update_from_output(out2, {"A": 11})
    assert out3.num_scheduled_tokens == {"A": 1} and a.num_output_placeholders == 1
    out4 = s.schedule()  # the fourth token
    s.update_from_output(out3, {"A": 12})
    # The fourth token (max_tokens) is in flight: no fifth step is planned.
    assert out4.num_scheduled_tokens == {"A": 1} and s.schedule().num_scheduled_tokens == {}
    outputs = s.update_from_output(out4, {"A": 13})
    assert a.output_token_ids == [10, 11, 12, 13] and outputs[0].finish_reason == "length"
    assert not s.has_unfinished_requests() and s.has_requests()  # the runner is told at the next plan
    s.schedule()
    assert not s.has_requests()
    s.check_invariants()


def test_a_stop_found_one_step_late_discards_the_extra_token():
    s = make_scheduler(num_blocks=16, block_size=4, budget=64, async_scheduling=True)
    params = SamplingParams(max_tokens=8, stop_token_ids=[99])
    a = Request("A", [3, 4, 5], params, eos_token_ids=[2], arrival_time=0.0, max_tokens=8)
    s.add_request(a)
    out1 = s.schedule()
    out2 = s.schedule()  # planned before step 1's token: a placeholder decode
    outputs = s.update_from_output(out1, {"A": 99})  # the stop token: A ends, step 2 is in flight
    assert [(o.request_id, o.new_token_ids, o.finish_reason) for o in outputs] == [("A", [99], "stop")]
    assert s.kv.block_ids("A") == [] and s.finished_req_ids == {"A"}
    out3 = s.schedule()
    assert out3.finished_req_ids == {"A"} and out3.num_scheduled_tokens == {}
    assert s.update_from_output(out2, {"A": 55}) == []  # the extra token: never shown, never counted
    assert a.output_token_ids == [99]
    s.check_invariants()
