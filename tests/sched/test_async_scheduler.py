"""Asynchronous scheduling worked by hand: steps planned before the previous step's tokens are applied."""

import pytest

from enginetui.core.request import Request, RequestStatus
from enginetui.core.sampling_params import SamplingParams
from tests.sched.by_hand import make_request, make_scheduler


@pytest.mark.parametrize("async_scheduling", [False, True])
def test_preempt_during_execution(async_scheduling):
    """vLLM's tests/v1/core/test_scheduler.py::test_preempt_during_execution, ported: a request
    preempted while its step is in flight still receives that step's token. vLLM runs it with the
    synchronous scheduler and two batches in flight; with asynchronous scheduling the second plan
    also decodes the first request on a placeholder, so its prompt is one token shorter to leave
    room for the second request's five blocks."""
    s = make_scheduler(
        num_blocks=10, block_size=16, budget=100, enable_prefix_caching=False, async_scheduling=async_scheduling
    )  # vLLM's 11 blocks less its null block
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


def _cached_owners(s) -> dict[str, int]:
    """Request id -> how many of its blocks are findable by hash."""
    return {rid: sum(1 for b in blocks if b.block_hash is not None) for rid, blocks in s.kv.req_to_blocks.items()}


def test_a_failed_step_unpublishes_its_own_blocks_not_those_of_the_next_plan():
    """Step 1 fails after step 2 was planned: the blocks step 1 was to write are forgotten (as the
    synchronous path forgets them), the blocks step 2 writes for another request stay findable."""
    s = make_scheduler(num_blocks=32, block_size=4, budget=64, enable_prefix_caching=True, async_scheduling=True)
    s.add_request(make_request("A", 10, max_tokens=4))
    out1 = s.schedule()  # A's prompt: blocks 0-1 fill in step 1 and are published at once
    s.add_request(make_request("B", 10, max_tokens=4, first_token=100))
    out2 = s.schedule()  # B's prompt (its blocks 0-1 published) and A's decode on a placeholder
    assert _cached_owners(s) == {"A": 2, "B": 2}
    assert s.fail_step(out1, "model step failed: RuntimeError: boom") == ["A"]
    s.update_from_output(out1, {})
    assert _cached_owners(s) == {"B": 2}  # B's blocks, computed by step 2, are still findable
    assert len(s.kv.pool.cached) == 2  # and A's are not (free, forgotten)
    s.update_from_output(out2, {"A": 9, "B": 8})  # A's token of step 2 is dropped: A has ended
    assert s.requests["B"].output_token_ids == [8] and "A" not in s.requests
    s.add_request(make_request("C", 10, max_tokens=4))  # A's prompt: nothing was ever written for it
    s.add_request(make_request("D", 10, max_tokens=4, first_token=100))  # B's prompt: written by step 2
    s.schedule()
    assert s.requests["C"].num_cached_tokens == 0 and s.requests["D"].num_cached_tokens == 8
    s.check_invariants()


def test_a_failed_steps_decode_blocks_published_by_the_next_plan_are_forgotten():
    """A decode's full block is published when its last token becomes known, which can be while
    the step writing its KV is still in flight: that step failing forgets it too."""
    s = make_scheduler(num_blocks=32, block_size=4, budget=64, enable_prefix_caching=True, async_scheduling=True)
    s.add_request(make_request("A", 3, max_tokens=8))
    out1 = s.schedule()  # KV of tokens 0-2, samples token 3
    out2 = s.schedule()  # KV of token 3 (a placeholder), samples token 4
    s.update_from_output(out1, {"A": 40})
    out3 = s.schedule()  # block 0 (tokens 0-3) is full and known: published, though step 2 writes its last token
    assert _cached_owners(s) == {"A": 1}
    s.fail_step(out2, "model step failed")
    s.update_from_output(out2, {})
    assert s.kv.pool.cached == {}
    s.update_from_output(out3, {"A": 41})
    s.check_invariants()


def test_a_request_of_the_next_plan_that_hit_a_failed_steps_blocks_starts_over():
    """B, planned while A's step 1 runs, finds A's prompt blocks by prefix; step 1 fails, so B was
    planned on KV never written: B starts over (its step in flight delivers nothing) and is served."""
    s = make_scheduler(num_blocks=32, block_size=4, budget=64, enable_prefix_caching=True, async_scheduling=True)
    s.add_request(make_request("A", 10, max_tokens=4))
    out1 = s.schedule()
    s.add_request(make_request("B", 10, max_tokens=2))  # the same prompt
    out2 = s.schedule()
    b = s.requests["B"]
    assert out2.num_scheduled_tokens["B"] == 2  # 8 tokens found in A's blocks
    s.fail_step(out1, "model step failed")
    s.update_from_output(out1, {})
    assert b.status is RequestStatus.PREEMPTED and b.num_computed_tokens == 0 and s.kv.block_ids("B") == []
    assert s.update_from_output(out2, {"A": 5, "B": 6}) == [] and b.output_token_ids == []
    out3 = s.schedule()
    assert out3.num_scheduled_tokens == {"B": 10}  # nothing cached to find: the whole prompt again
    s.update_from_output(out3, {"B": 7})
    assert b.output_token_ids == [7] and b.num_in_flight_tokens == 0
    s.check_invariants()
