"""The model runner packs a mixed prefill/decode step into flat, unpadded tensors."""

import torch

from enginetui.core.sched.output import CachedRequestData, SchedulerOutput
from tests.worker.tiny_runner import make_runner, new_req


def test_article_packing_example():
    # A: a 4-token prefill; B decodes at position 50; C decodes at position 30.
    runner = make_runner()
    out = SchedulerOutput(
        scheduled_new_reqs=[new_req("A", 4, 0, [7]), new_req("B", 51, 50, [3, 9, 4, 12]), new_req("C", 31, 30, [5, 6])],
        scheduled_cached_reqs=CachedRequestData(),
        num_scheduled_tokens={"A": 4, "B": 1, "C": 1},
        total_num_scheduled_tokens=6,
        finished_req_ids=set(),
        preempted_req_ids=set(),
    )
    runner.update_states(out)
    packed = runner.prepare_inputs(out)
    assert packed.req_ids == ["A", "B", "C"]
    assert packed.attn.query_start_loc.tolist() == [0, 4, 5, 6]
    assert packed.positions.tolist() == [0, 1, 2, 3, 50, 30]
    assert packed.input_ids.tolist() == [10, 11, 12, 13, 60, 40]
    assert packed.attn.seq_lens.tolist() == [4, 51, 31]
    # Slot = physical block * 16 + offset: A's block 7; B's position 50 is logical block 3 (physical 12), offset 2.
    assert packed.attn.slot_mapping.tolist() == [112, 113, 114, 115, 12 * 16 + 2, 6 * 16 + 14]
    assert packed.logits_indices.tolist() == [3, 4, 5]  # one logit row per request, only the last token
    assert packed.attn.block_table.shape == (3, 4)
    assert packed.attn.block_table[0, 0].item() == 7 and packed.attn.block_table[1].tolist() == [3, 9, 4, 12]


def test_partial_prefill_chunk_gets_no_logits_and_deltas_extend_the_batch():
    runner = make_runner(block_size=4)
    first = SchedulerOutput(
        scheduled_new_reqs=[new_req("A", 10, 0, [1, 2])],
        scheduled_cached_reqs=CachedRequestData(),
        num_scheduled_tokens={"A": 6},
        total_num_scheduled_tokens=6,
        finished_req_ids=set(),
        preempted_req_ids=set(),
    )
    runner.update_states(first)
    packed = runner.prepare_inputs(first)
    assert packed.logits_indices.tolist() == []  # 6 of 10 prompt tokens: nothing to sample yet
    second = SchedulerOutput(
        scheduled_new_reqs=[],
        num_scheduled_tokens={"A": 4},
        total_num_scheduled_tokens=4,
        scheduled_cached_reqs=CachedRequestData(
            req_ids=["A"], new_token_ids=[[]], new_block_ids=[[5]], num_computed_tokens=[6]
        ),
        finished_req_ids=set(),
        preempted_req_ids=set(),
    )
    runner.update_states(second)
    packed = runner.prepare_inputs(second)
    assert packed.positions.tolist() == [6, 7, 8, 9]
    assert packed.attn.slot_mapping.tolist() == [2 * 4 + 2, 2 * 4 + 3, 5 * 4 + 0, 5 * 4 + 1]
    assert packed.logits_indices.tolist() == [3]


def test_removed_rows_are_refilled_by_the_last_row():
    runner = make_runner()
    out = SchedulerOutput(
        scheduled_new_reqs=[new_req("A", 3, 0, [1]), new_req("B", 3, 0, [2]), new_req("C", 3, 0, [3])],
        scheduled_cached_reqs=CachedRequestData(),
        num_scheduled_tokens={"A": 3, "B": 3, "C": 3},
        total_num_scheduled_tokens=9,
        finished_req_ids=set(),
        preempted_req_ids=set(),
    )
    runner.update_states(out)
    runner.batch.remove("A")
    assert runner.batch.req_ids == ["C", "B"]
    assert runner.batch.block_table[0, 0] == 3 and runner.batch.index == {"C": 0, "B": 1}


def test_the_output_says_how_many_threads_the_step_ran_on():
    """What the thread governor sets is what the step event reports: the runner reads the count the
    step's operators ran on, in the thread that ran them."""
    runner = make_runner()
    before = torch.get_num_threads()
    plan = lambda req_id: SchedulerOutput(  # noqa: E731
        scheduled_new_reqs=[new_req(req_id, 4, 0, [len(req_id)])],
        scheduled_cached_reqs=CachedRequestData(),
        num_scheduled_tokens={req_id: 4},
        total_num_scheduled_tokens=4,
        finished_req_ids=set(),
        preempted_req_ids=set(),
    )
    try:
        torch.set_num_threads(1)
        assert runner.execute(plan("A")).compute_threads == 1
        torch.set_num_threads(2)
        assert runner.execute(plan("BB")).compute_threads == 2
    finally:
        torch.set_num_threads(before)
