"""The scheduler, worked by hand step by step."""

import pytest

from enginetui.core.request import RequestStatus
from enginetui.core.sampling_params import SamplingParams
from tests.sched.by_hand import make_request, make_scheduler, run_step


def test_budget_clamp_splits_a_5000_token_prompt():
    s = make_scheduler(num_blocks=400, budget=2048)
    s.add_request(make_request("A", 5000, max_tokens=4))
    chunks = [run_step(s).num_scheduled_tokens["A"] for _ in range(3)]
    assert chunks == [2048, 2048, 904]
    a = s.requests["A"]
    assert a.num_computed_tokens == 5000 and a.num_output_tokens == 1  # sampled only after the last chunk
    assert len(s.kv.req_to_blocks["A"]) == 313  # ceil(5000 / 16)
    out = run_step(s)
    assert out.num_scheduled_tokens == {"A": 1} and out.num_decode_tokens == 1


def test_without_chunked_prefill_an_over_budget_prompt_waits_whole():
    s = make_scheduler(budget=64, max_model_len=128, enable_chunked_prefill=False)
    s.add_request(make_request("A", 40))
    s.add_request(make_request("B", 40))
    out = run_step(s)
    assert out.num_scheduled_tokens == {"A": 40}  # B would need 40 > 24 left: it waits, unsplit
    assert [r.request_id for r in s.waiting] == ["B"]
    out = run_step(s)
    assert out.num_scheduled_tokens == {"A": 1, "B": 40}


def test_running_requests_are_scheduled_before_waiting_ones():
    s = make_scheduler(budget=10)
    s.add_request(make_request("A", 8))
    assert run_step(s).num_scheduled_tokens == {"A": 8}
    s.add_request(make_request("B", 30))
    out = run_step(s)
    assert list(out.num_scheduled_tokens) == ["A", "B"]
    assert out.num_scheduled_tokens == {"A": 1, "B": 9}  # A's decode first, B gets what is left
    assert out.scheduled_new_reqs[0].req_id == "B"
    assert out.scheduled_cached_reqs.req_ids == ["A"]


def test_lifo_victim_is_freed_reset_and_prepended():
    # 4 blocks of 4 tokens. A and B take 2 blocks each; A's next token needs a 3rd block.
    s = make_scheduler(num_blocks=4, block_size=4, budget=100, max_model_len=64)
    s.add_request(make_request("A", 8, max_tokens=8))
    s.add_request(make_request("B", 7, max_tokens=8))
    s.add_request(make_request("C", 3, max_tokens=4))  # waits: the pool is full after A and B
    out = run_step(s)
    assert out.num_scheduled_tokens == {"A": 8, "B": 7}
    assert s.kv.pool.num_free_blocks == 0
    out = run_step(s)  # A needs block 3 -> B, the tail of running, is preempted
    assert out.preempted_req_ids == {"B"}
    assert out.num_scheduled_tokens == {"A": 1}
    b = s.requests["B"]
    assert b.status is RequestStatus.PREEMPTED and b.num_computed_tokens == 0 and b.num_output_tokens == 1
    assert [r.request_id for r in s.waiting] == ["B", "C"]  # prepended ahead of C
    record = s.drain_step_record()
    assert [(p.req_id, p.lost_tokens, p.freed_blocks) for p in record.preempted] == [("B", 7, 2)]


def test_recompute_reschedules_prompt_and_outputs():
    s = make_scheduler(num_blocks=4, block_size=4, budget=100, max_model_len=64)
    s.add_request(make_request("A", 8, max_tokens=3))
    s.add_request(make_request("B", 7, max_tokens=8))
    run_step(s)
    run_step(s)  # B preempted with 1 output token
    run_step(s)  # A: 3rd token -> finished (max_tokens 3), frees 3 blocks
    assert "A" not in s.requests
    out = run_step(s)  # B is readmitted: recompute prompt (7) + its 1 output
    assert out.num_scheduled_tokens == {"B": 8}
    new = out.scheduled_new_reqs[0]
    assert new.req_id == "B" and len(new.token_ids) == 8 and new.num_computed_tokens == 0
    assert s.requests["B"].num_output_tokens == 2


def test_priority_policy_preempts_the_lowest_priority_request():
    s = make_scheduler(num_blocks=6, block_size=4, budget=100, max_model_len=64, scheduling_policy="priority")
    s.add_request(make_request("A", 8, priority=0, arrival=1))
    s.add_request(make_request("B", 8, priority=5, arrival=2))
    s.add_request(make_request("C", 8, priority=1, arrival=3))
    out = run_step(s)
    assert out.num_scheduled_tokens == {"A": 8, "C": 8, "B": 8}  # admitted by priority
    out = run_step(s)  # A needs a block: B (priority 5) goes, though C is the tail
    assert out.preempted_req_ids == {"B"}
    assert set(out.num_scheduled_tokens) == {"A", "C"}


def test_priority_victim_already_scheduled_this_step_gives_back_its_budget():
    s = make_scheduler(num_blocks=4, block_size=4, budget=100, max_model_len=64, scheduling_policy="priority")
    s.add_request(make_request("X", 6, max_tokens=4, priority=9, arrival=1))
    run_step(s)  # X: 6 tokens in 2 blocks
    s.add_request(make_request("Y", 8, max_tokens=4, priority=0, arrival=2))
    run_step(s)  # X decodes inside block 2; Y takes the last 2 blocks
    out = run_step(s)  # X is scheduled first, then Y needs a 3rd block: X is the victim
    assert out.preempted_req_ids == {"X"}
    assert out.num_scheduled_tokens == {"Y": 1}
    assert out.total_num_scheduled_tokens == 1
    assert out.scheduled_cached_reqs.req_ids == ["Y"]
    assert [r.request_id for r in s.waiting] == ["X"]


def test_never_fit_request_is_rejected_with_a_reason():
    s = make_scheduler(num_blocks=4, block_size=4, max_model_len=64)
    s.add_request(make_request("big", 20, max_tokens=4))  # 24 tokens need 6 blocks > 4
    s.add_request(make_request("long", 60, max_tokens=8))  # 68 > max_model_len 64
    out = s.schedule()
    outputs = s.update_from_output(out, {})
    reasons = {o.request_id: (o.finish_reason, o.finish_detail) for o in outputs}
    assert reasons["big"][0] == "rejected" and "6 KV blocks" in reasons["big"][1] and "pool has 4" in reasons["big"][1]
    assert reasons["long"][0] == "rejected" and "max_model_len" in reasons["long"][1]
    assert not s.has_unfinished_requests()


def test_every_block_is_free_after_all_requests_finish():
    s = make_scheduler(num_blocks=10, block_size=4, budget=12, max_model_len=64)
    for i in range(6):
        s.add_request(make_request(f"r{i}", 3 + 2 * i, max_tokens=5))
    steps = 0
    while s.has_unfinished_requests():
        run_step(s)
        steps += 1
        assert steps < 200
    assert s.kv.pool.num_free_blocks == 10 and not s.kv.req_to_blocks


def test_abort_frees_blocks_and_reports_once():
    s = make_scheduler(num_blocks=10, block_size=4, max_model_len=64)
    s.add_request(make_request("A", 10))
    s.add_request(make_request("B", 10))
    run_step(s)
    assert s.finish_requests(["A", "nope"], RequestStatus.FINISHED_ABORTED, "aborted") == ["A"]
    out = s.schedule()
    assert "A" in out.finished_req_ids
    outputs = s.update_from_output(out, {"B": 5})
    assert [o.finish_reason for o in outputs if o.request_id == "A"] == ["abort"]
    s.check_invariants()
    assert s.kv.pool.num_free_blocks == 10 - 3


def test_max_num_seqs_caps_running():
    s = make_scheduler(max_num_seqs=2)
    for i in range(4):
        s.add_request(make_request(f"r{i}", 5))
    out = run_step(s)
    assert set(out.num_scheduled_tokens) == {"r0", "r1"}


@pytest.mark.parametrize("policy", ["fcfs", "priority"])
def test_forward_progress_under_a_tiny_pool(policy):
    # Many requests that each fit the pool alone: all finish, none starves.
    s = make_scheduler(num_blocks=6, block_size=4, budget=16, max_model_len=64, scheduling_policy=policy)
    for i in range(12):
        s.add_request(make_request(f"r{i}", 4 + (i * 5) % 11, max_tokens=6, priority=i % 3, arrival=i))
    steps, preemptions = 0, 0
    while s.has_unfinished_requests():
        out = run_step(s)
        preemptions += len(out.preempted_req_ids)
        steps += 1
        assert steps < 2000
    assert preemptions > 0 and s.kv.pool.num_free_blocks == 6


def test_eos_stops_unless_ignored_and_not_before_min_tokens():
    s = make_scheduler(max_model_len=64)
    eos_req = make_request("eos", 4, max_tokens=8)
    eos_req.sampling_params = SamplingParams(max_tokens=8, min_tokens=2)
    s.add_request(eos_req)
    out = s.schedule()
    assert s.update_from_output(out, {"eos": 2})[0].finish_reason is None  # 1 token < min_tokens 2
    out = s.schedule()
    finished = s.update_from_output(out, {"eos": 2})[0]
    assert finished.finish_reason == "stop" and finished.stop_token_id == 2
    ignoring = make_request("ign", 4, max_tokens=2)  # ignore_eos=True
    s.add_request(ignoring)
    for _ in range(2):
        out = s.schedule()
        last = s.update_from_output(out, {"ign": 2})[0]
    assert last.finish_reason == "length"
