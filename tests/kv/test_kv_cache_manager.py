"""Block pool accounting and the KV cache manager's allocate / free."""

from enginetui.core.kv.block_hash import NONE_HASH, hash_block, update_block_hashes
from enginetui.core.kv.kv_cache_manager import KVCacheManager
from enginetui.core.request import Request
from enginetui.core.sampling_params import SamplingParams


def req(rid, n, start=3):
    return Request(rid, list(range(start, start + n)), SamplingParams(), [2], 0.0, 0, 16)


def test_allocate_grows_block_tables_and_respects_the_pool():
    kv = KVCacheManager(num_blocks=5, block_size=4, enable_prefix_caching=False)
    a, b = req("a", 6), req("b", 9)
    assert [blk.block_id for blk in kv.allocate_slots(a, 6)] == [0, 1]
    assert len(kv.allocate_slots(b, 9)) == 3
    kv.check_invariants()
    a.num_computed_tokens = 6
    assert kv.allocate_slots(a, 2) == []  # 8 tokens still fit 2 blocks
    a.num_computed_tokens = 8
    assert kv.allocate_slots(a, 1) is None  # a 3rd block: pool empty
    assert kv.block_ids("a") == [0, 1]  # failure changes nothing
    kv.check_invariants()
    assert kv.free(b) == 3
    assert kv.pool.num_free_blocks == 3
    kv.check_invariants()


def test_freed_blocks_without_cached_content_go_to_the_head_last_block_first():
    kv = KVCacheManager(num_blocks=4, block_size=2, enable_prefix_caching=False)
    a = req("a", 6)
    kv.allocate_slots(a, 6)  # blocks 0, 1, 2
    kv.free(a)
    assert kv.pool.free_block_ids() == [2, 1, 0, 3]  # reused before the never-used block 3 (vLLM 0.23+)
    assert kv.pool.drain_step_changes() == ([0, 1, 2], [2, 1, 0])
    b = req("b", 2)
    assert [blk.block_id for blk in kv.allocate_slots(b, 2)] == [2]


def test_full_sequence_must_fit_counts_the_whole_prompt_not_the_chunk():
    kv = KVCacheManager(num_blocks=4, block_size=4, enable_prefix_caching=False)
    a = req("a", 20)  # 5 blocks: more than the pool
    assert kv.allocate_slots(a, 8, full_sequence_must_fit=True) is None
    assert "a" not in kv.req_to_blocks
    assert len(kv.allocate_slots(a, 8)) == 2  # the first chunk alone fits


def test_block_hashes_are_sha256_chained_over_the_prefix():
    a, b = req("a", 8), req("b", 8, start=4)  # b's first block differs, its second block's tokens...
    b.prompt_token_ids[4:] = a.prompt_token_ids[4:]  # ...equal a's
    ha, hb = update_block_hashes(a, 4), update_block_hashes(b, 4)
    assert all(isinstance(h, bytes) and len(h) == 32 for h in ha)
    assert ha[1] != hb[1]  # same tokens, different prefix: different identity
    assert ha[0] == hash_block(NONE_HASH, a.prompt_token_ids[:4])
    assert ha == update_block_hashes(req("c", 8), 4)  # deterministic
