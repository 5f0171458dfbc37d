"""vLLM's scheduling rules worked by hand (docs/architecture.md "Scheduling rules"); no vLLM needed."""

import pytest

from enginetui.core.config import EngineConfig
from enginetui.core.sched.step_record import Admitted
from tests.sched.by_hand import make_request, make_scheduler, run_step


def test_full_isl_admission_waits_for_room_for_the_whole_prompt():
    s = make_scheduler(num_blocks=6, block_size=4, budget=16, max_model_len=64)
    s.add_request(make_request("A", 12, max_tokens=4))  # 3 blocks
    s.add_request(make_request("B", 16, max_tokens=2))  # 4 blocks; its first 4-token chunk would fit
    assert run_step(s).num_scheduled_tokens == {"A": 12}  # B needs 4 blocks, 3 are free
    assert run_step(s).num_scheduled_tokens == {"A": 1}  # A took a 4th block: still no room for B


def test_first_chunk_admission_as_vllm_022_admits_then_preempts():
    s = make_scheduler(num_blocks=6, block_size=4, budget=16, max_model_len=64, scheduler_reserve_full_isl=False)
    s.add_request(make_request("A", 12, max_tokens=4))
    s.add_request(make_request("B", 16, max_tokens=2))
    assert run_step(s).num_scheduled_tokens == {"A": 12, "B": 4}  # B's first chunk fits one block
    out = run_step(s)  # A's decode takes a block; B's remaining 12 tokens need 3 more with 1 free
    assert out.num_scheduled_tokens == {"A": 1} and out.preempted_req_ids == {"B"}


def test_long_prefill_token_threshold_caps_each_request_per_step():
    s = make_scheduler(budget=16, long_prefill_token_threshold=6)
    s.add_request(make_request("A", 20))
    s.add_request(make_request("B", 20))
    chunks = [run_step(s).num_scheduled_tokens for _ in range(4)]
    assert chunks == [{"A": 6, "B": 6}, {"A": 6, "B": 6}, {"A": 6, "B": 6}, {"A": 2, "B": 2}]


def test_long_prefill_token_threshold_spares_a_lone_request():
    s = make_scheduler(budget=16, long_prefill_token_threshold=6)
    s.add_request(make_request("A", 20))
    assert run_step(s).num_scheduled_tokens == {"A": 16}  # nobody to starve: the whole budget


def test_long_prefill_token_threshold_is_validated_like_vllm():
    with pytest.raises(ValueError, match="non-negative integer"):
        EngineConfig(long_prefill_token_threshold=-1)
    with pytest.raises(ValueError, match="cannot be greater than max_model_len"):
        EngineConfig(long_prefill_token_threshold=300, max_model_len=256)
    with pytest.raises(ValueError, match="cannot be greater than max_model_len"):  # the model's length, resolved
        make_scheduler(long_prefill_token_threshold=300, max_model_len=256)
    with pytest.raises(ValueError, match="True or False"):
        EngineConfig(scheduler_reserve_full_isl="yes")


def test_priority_ties_break_by_arrival_then_request_id():
    s = make_scheduler(scheduling_policy="priority")
    s.add_request(make_request("c", 4, arrival=2.0))
    s.add_request(make_request("b", 4, arrival=1.0))
    s.add_request(make_request("a", 4, arrival=1.0))
    s.add_request(make_request("z", 4, arrival=9.0, priority=-1))
    assert [r.request_id for r in s.waiting] == ["z", "a", "b", "c"]


def test_waiting_stops_at_the_first_request_that_does_not_fit():
    s = make_scheduler(num_blocks=4, block_size=4, max_model_len=64)
    s.add_request(make_request("A", 8, max_tokens=8))  # 2 blocks
    s.add_request(make_request("B", 12, max_tokens=1))  # 3 blocks: only 2 free
    s.add_request(make_request("C", 2, max_tokens=1))  # would fit, but is not let past B
    assert run_step(s).num_scheduled_tokens == {"A": 8}
    assert [r.request_id for r in s.waiting] == ["B", "C"]


def test_resumed_hits_are_recorded_but_num_cached_tokens_keeps_the_first_admission():
    s = make_scheduler(num_blocks=5, block_size=4, max_model_len=64, enable_prefix_caching=True)
    s.add_request(make_request("A", 8, max_tokens=2, first_token=10))  # blocks 0, 1
    s.add_request(make_request("B", 8, max_tokens=4, first_token=20))  # blocks 2, 3 (published)
    run_step(s)
    out = run_step(s)  # A's 9th token takes block 4; B's needs one more: B preempts itself
    assert out.preempted_req_ids == {"B"} and "A" not in s.requests  # A finished (max_tokens 2)
    out = run_step(s)  # B's freed blocks are still cached: it resumes with 8 of its 9 tokens
    assert out.num_scheduled_tokens == {"B": 1}
    assert s.drain_step_record().admitted[-1] == Admitted("B", 1, 8, True)
    assert s.requests["B"].num_cached_tokens == 0  # vLLM reports the first admission's hits
    kv = s.kv
    assert (kv.prefix_queries, kv.prefix_hits) == (16, 0)  # hit rate counts first admissions
    assert (kv.preempted_prefix_queries, kv.preempted_prefix_hits) == (9, 8)
