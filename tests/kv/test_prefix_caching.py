"""Prefix caching worked by hand: hits, sharing, reference counts, eviction order."""

import random

from enginetui.core import LLM, SamplingParams
from enginetui.core.request import Request, RequestStatus
from enginetui.core.sampling_params import SamplingParams as SP
from tests.sched.by_hand import make_scheduler, run_step
from tests.support.event_capture import recorded_events


def req(rid, tokens, max_tokens=2):
    return Request(rid, list(tokens), SP(max_tokens=max_tokens, ignore_eos=True), [2], 0.0, 0, max_tokens)


def caching_scheduler(num_blocks=16, **kw):
    return make_scheduler(
        num_blocks=num_blocks, block_size=4, budget=64, max_model_len=64, enable_prefix_caching=True, **kw
    )


A = list(range(100, 110))  # 10 tokens: 2 full blocks of 4 + a partial one


def test_hits_are_counted_exactly():
    s = caching_scheduler()
    s.add_request(req("A", A, max_tokens=4))
    run_step(s)  # A computes 10 tokens; blocks 0-1 are full and published, block 2 is partial
    s.add_request(req("B", A[:9] + [999]))  # shares 2 full blocks (8 tokens), differs at token 9
    s.add_request(req("C", A))  # same prompt: 2 blocks; the last token is always computed
    s.add_request(req("D", A[:8]))  # exactly 2 blocks long: only 1 may come from the cache
    s.add_request(req("E", [7] + A[1:]))  # differs in the first token: no hit at all
    out = run_step(s)
    cached = {r.request_id: r.num_cached_tokens for r in s.running}
    assert cached == {"A": 0, "B": 8, "C": 8, "D": 4, "E": 0}
    assert out.num_scheduled_tokens == {"A": 1, "B": 2, "C": 2, "D": 4, "E": 10}
    assert s.kv.prefix_hits == 8 + 8 + 4 and s.kv.prefix_queries == 10 + 10 + 10 + 8 + 10


def test_shared_blocks_are_reference_counted_and_released():
    s = caching_scheduler()
    s.add_request(req("A", A, max_tokens=4))
    run_step(s)
    s.add_request(req("B", A, max_tokens=4))
    run_step(s)
    a_blocks, b_blocks = s.kv.req_to_blocks["A"], s.kv.req_to_blocks["B"]
    assert a_blocks[:2] == b_blocks[:2] and a_blocks[2] is not b_blocks[2]
    assert [b.ref_cnt for b in a_blocks[:2]] == [2, 2]
    s.finish_requests(["A"], RequestStatus.FINISHED_ABORTED, "abort")
    assert [b.ref_cnt for b in b_blocks[:2]] == [1, 1]
    s.finish_requests(["B"], RequestStatus.FINISHED_ABORTED, "abort")
    s.check_invariants()
    assert all(b.ref_cnt == 0 for b in s.kv.pool.blocks)
    assert s.kv.pool.num_free_blocks == 16 and len(s.kv.pool.cached) >= 2  # freed but still cached


def test_a_partially_filled_block_is_never_shared():
    s = caching_scheduler()
    s.add_request(req("A", A[:6], max_tokens=1))  # 1 full block + 2 tokens; finishes after one step
    run_step(s)
    assert len(s.kv.pool.cached) == 1
    s.add_request(req("B", A[:6] + [1, 2, 3]))
    run_step(s)
    assert s.requests["B"].num_cached_tokens == 4


def test_eviction_takes_never_cached_blocks_first_then_least_recently_freed():
    s = caching_scheduler(num_blocks=4)
    pool = s.kv.pool
    s.add_request(req("A", A[:8], max_tokens=1))  # 2 full blocks, physical 0 and 1, both published
    run_step(s)  # A finishes; its blocks are freed last-block first
    assert pool.free_block_ids() == [2, 3, 1, 0] and {b.block_id for b in pool.blocks if b.block_hash} == {0, 1}
    s.add_request(req("B", [1] * 8, max_tokens=1))  # 2 fresh blocks: the never-cached 2 and 3
    run_step(s)
    assert pool.blocks[0].block_hash is not None and pool.blocks[1].block_hash is not None
    assert pool.free_block_ids() == [1, 0, 3, 2]
    s.add_request(req("C", [5] * 3, max_tokens=1))  # 1 fresh block: evicts block 1, A's *last* block
    run_step(s)
    assert pool.blocks[1].block_hash is None and pool.blocks[0].block_hash is not None
    s.add_request(req("D", A[:8] + [9], max_tokens=1))  # A's first block survives: a 4-token hit
    s.schedule()
    assert s.running[0].num_cached_tokens == 4 and s.kv.req_to_blocks["D"][0] is pool.blocks[0]
    s.check_invariants()


def test_every_copy_of_a_block_is_findable_so_evicting_one_keeps_the_content():
    s = caching_scheduler(num_blocks=6)
    pool = s.kv.pool
    s.add_request(req("A", A[:8], max_tokens=1))  # blocks 0, 1
    s.add_request(req("B", A[:8], max_tokens=1))  # hits block 0 only (its last token is computed): block 2
    run_step(s)  # block 2 is a second copy of block 1's content; A and B finish
    assert [len(copies) for copies in pool.cached.values()] == [1, 2]
    assert pool.free_block_ids() == [3, 4, 5, 1, 2, 0]
    s.add_request(req("D", [50] * 16, max_tokens=1))  # 4 fresh blocks: 3, 4, 5 and 1 (evicting A's copy)
    run_step(s)
    s.add_request(req("E", A[:8] + [9]))
    s.schedule()
    assert s.requests["E"].num_cached_tokens == 8  # B's copy serves the second block
    assert [b.block_id for b in s.kv.req_to_blocks["E"][:2]] == [0, 2]
    s.check_invariants()


def test_freed_blocks_holding_no_cached_content_are_reused_first():
    s = caching_scheduler()
    pool = s.kv.pool
    s.add_request(req("A", A, max_tokens=1))  # blocks 0, 1 full and published; block 2 partial
    run_step(s)
    assert pool.free_block_ids() == [2, *range(3, 16), 1, 0]  # uncached at the head, cached at the tail
    s.add_request(req("B", [7, 7, 7]))
    run_step(s)
    assert s.kv.block_ids("B") == [2]


def test_reset_forgets_every_cached_block():
    s = caching_scheduler()
    s.add_request(req("A", A, max_tokens=1))
    run_step(s)
    assert s.kv.pool.cached
    s.kv.reset_prefix_cache()
    s.add_request(req("B", A))
    run_step(s)
    assert s.requests["B"].num_cached_tokens == 0


def test_outputs_identical_with_and_without_caching(tiny_opt_dir):
    rng = random.Random(0)
    prefixes = [[2] + [rng.randrange(4, 512) for _ in range(n)] for n in (37, 64, 20)]
    prompts = [rng.choice(prefixes) + [rng.randrange(4, 512) for _ in range(rng.randint(1, 20))] for _ in range(16)]
    params = SamplingParams(temperature=0, max_tokens=10, ignore_eos=True)
    results, hit_rates = [], []
    for caching in (False, True):
        llm = LLM(
            model=tiny_opt_dir,
            multiprocess=False,
            skip_tokenizer_init=True,
            enable_prefix_caching=caching,
            num_gpu_blocks_override=20,
            block_size=16,
            max_num_batched_tokens=64,
            debug_invariants=True,
        )
        with recorded_events(llm.engine) as events:
            results.append([o.outputs[0].token_ids for o in llm.generate(prompts, params, use_tqdm=False)])
        hit_rates.append(events[-1].prefix_cache_hits)
        if caching:
            assert sum(len(e.preempted) for e in events) > 0  # preemption with shared blocks too
            assert any(e.shared_blocks for e in events) and any(e.cached_free_blocks for e in events)
            assert events[-1].num_free_blocks == 20
        llm.shutdown()
    assert results[0] == results[1]
    assert hit_rates[0] == 0 and hit_rates[1] > 0


def test_reset_through_the_control_channel_of_a_running_engine(tiny_opt_dir):
    llm = LLM(
        model=tiny_opt_dir,
        multiprocess=True,
        skip_tokenizer_init=True,
        enable_prefix_caching=True,
        num_gpu_blocks_override=32,
        block_size=16,
    )
    engine = llm.engine
    prompt = [[2] + list(range(10, 60))]  # 51 tokens: 3 full blocks
    params = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)
    try:
        llm.generate(prompt, params, use_tqdm=False)
        assert len(engine.snapshot().cached_free_blocks) >= 3
        again = llm.generate(prompt, params, use_tqdm=False)[0]
        assert again.num_cached_tokens == 48
        assert llm.reset_prefix_cache() is True
        assert engine.snapshot().cached_free_blocks == []
        after_reset = llm.generate(prompt, params, use_tqdm=False)[0]
        assert after_reset.num_cached_tokens == 0
        assert after_reset.outputs[0].token_ids == again.outputs[0].token_ids
    finally:
        llm.shutdown()
