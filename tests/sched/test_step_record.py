"""The scheduler's plain record of what it did, and its failure paths (failed step, bad request, reset)."""

from enginetui.core.request import RequestStatus
from enginetui.core.sched.step_record import Admitted, Chunk, Ended, Preempted
from tests.sched.by_hand import make_request, make_scheduler, run_step


def test_a_step_records_admissions_preemptions_and_endings():
    s = make_scheduler(num_blocks=4, block_size=4, budget=100, max_model_len=64)
    s.add_request(make_request("A", 8, max_tokens=8))
    s.add_request(make_request("B", 7, max_tokens=8))
    run_step(s)
    record = s.drain_step_record()
    assert record.admitted == [Admitted("A", 8, 0, False), Admitted("B", 7, 0, False)]
    assert record.preempted == [] and record.finished == [] and record.rejected == []
    run_step(s)  # A's 9th token needs a third block: B (the newest) is preempted
    assert s.drain_step_record().preempted == [Preempted("B", 7, 2)]
    while "B" not in {r.request_id for r in s.running}:
        run_step(s)
    record = s.drain_step_record()
    resumed = [a for a in record.admitted if a.req_id == "B"]
    assert resumed == [Admitted("B", 8, 0, True)]  # prompt + its one output token, recomputed
    assert [e.req_id for e in record.finished] == ["A"] and record.finished[0].reason == "length"
    assert s.drain_step_record().admitted == []  # drained


def test_between_steps_aborts_rejections_and_errors_are_recorded_with_their_outputs():
    s = make_scheduler(num_blocks=4, block_size=4, max_model_len=64)
    s.add_request(make_request("A", 5, max_tokens=4))
    s.add_request(make_request("huge", 40))  # 55 tokens of KV need 14 blocks of a pool of 4
    s.report_error("bad", "request could not be decoded: junk")
    s.finish_requests(["A"], RequestStatus.FINISHED_ABORTED, "aborted by the client")
    record = s.drain_step_record()
    assert record.rejected == [
        Ended(
            "huge", "rejected", "needs 14 KV blocks for 55 tokens (prompt + max_tokens - 1) but the whole pool has 4", 0
        )
    ]
    assert record.finished == [
        Ended("bad", "error", "request could not be decoded: junk", 0),
        Ended("A", "abort", "aborted by the client", 0),
    ]
    outputs = {o.request_id: o.finish_reason for o in s.take_pending_outputs()}
    assert outputs == {"huge": "rejected", "bad": "error", "A": "abort"}
    assert not s.has_pending_outputs() and not s.has_unfinished_requests()


def test_a_failed_step_ends_its_requests_and_leaves_nothing_findable_by_hash():
    s = make_scheduler(num_blocks=16, block_size=4, enable_prefix_caching=True, max_model_len=64)
    s.add_request(make_request("A", 10, max_tokens=4))
    out = s.schedule()  # A's blocks 0-1 fill this step and are published at once
    assert len(s.kv.pool.cached) == 2
    assert s.fail_step(out, "model step failed: RuntimeError: boom") == ["A"]
    s.update_from_output(out, {})
    assert s.kv.pool.cached == {} and all(b.block_hash is None for b in s.kv.pool.blocks)
    assert [(e.req_id, e.reason) for e in s.drain_step_record().finished] == [("A", "error")]
    s.add_request(make_request("B", 10, max_tokens=4))  # the same prompt
    run_step(s)
    assert s.requests["B"].num_cached_tokens == 0  # nothing served from KV that was never written
    s.check_invariants()


def test_a_failed_step_keeps_older_copies_that_were_written():
    s = make_scheduler(num_blocks=16, block_size=4, enable_prefix_caching=True, max_model_len=64)
    s.add_request(make_request("A", 10, max_tokens=4))
    run_step(s)  # A's two full blocks are computed
    s.add_request(make_request("B", 10, max_tokens=4))  # hits A's two blocks
    out = s.schedule()
    assert s.requests["B"].num_cached_tokens == 8
    s.fail_step(out, "model step failed")
    s.update_from_output(out, {})
    assert len(s.kv.pool.cached) == 2  # computed in an earlier, successful step: still good
    s.add_request(make_request("C", 10, max_tokens=4))
    run_step(s)
    assert s.requests["C"].num_cached_tokens == 8


def test_reset_prefix_cache_refuses_while_blocks_are_in_use():
    s = make_scheduler(num_blocks=16, block_size=4, enable_prefix_caching=True, max_model_len=64)
    s.add_request(make_request("A", 10, max_tokens=2))
    run_step(s)
    assert s.reset_prefix_cache() is False and len(s.kv.pool.cached) == 2
    run_step(s)  # A finishes; its blocks are free but still cached
    assert s.kv.pool.cached and s.reset_prefix_cache() is True
    assert s.kv.pool.cached == {}


def test_the_record_carries_the_plan_split_prefills_decodes_and_block_changes():
    s = make_scheduler(num_blocks=16, block_size=4, budget=6, max_model_len=64)
    s.add_request(make_request("A", 4, max_tokens=3))
    s.add_request(make_request("B", 9, max_tokens=3))
    run_step(s)  # A's whole prompt (4) and B's first 2 tokens
    record = s.drain_step_record()
    assert record.scheduled == {"A": 4, "B": 2}
    assert (record.num_prefill_tokens, record.num_decode_tokens) == (6, 0)
    assert record.chunks == [Chunk("B", 2, 7)] and record.decodes == []
    assert record.blocks_allocated == [0, 1] and record.blocks_freed == []  # one block each so far
    run_step(s)  # A decodes; B gets 5 more of its prompt, 2 still to go
    record = s.drain_step_record()
    assert record.scheduled == {"A": 1, "B": 5} and record.decodes == ["A"]
    assert (record.num_prefill_tokens, record.num_decode_tokens) == (5, 1)
    assert record.chunks == [Chunk("B", 5, 2)]
    run_step(s)  # B's last piece of prompt is still a chunk (the end of a split prefill)
    record = s.drain_step_record()
    assert record.chunks == [Chunk("B", 2, 0)] and record.decodes == ["A"]
    assert [e.req_id for e in record.finished] == ["A"] and record.blocks_freed == [
        2,
        0,
    ]  # A held 0 and 2, freed tail first


def test_kv_state_reports_the_pool_and_shared_blocks():
    s = make_scheduler(num_blocks=16, block_size=4, enable_prefix_caching=True, max_model_len=64)
    s.add_request(make_request("A", 10, max_tokens=4))
    run_step(s)
    s.add_request(make_request("B", 10, max_tokens=4))  # the same prompt: A's two full blocks are shared
    run_step(s)
    state = s.kv_state()
    assert state.num_blocks == 16 and state.shared_blocks == [0, 1]
    assert state.num_free_blocks == 16 - 4 and state.cached_free_blocks == []
    assert (state.prefix_cache_queries, state.prefix_cache_hits) == (20, 8)
