"""Block pool accounting and the KV cache manager's allocate / free."""

from core.kv.kv_cache_manager import KVCacheManager
from core.request import Request
from core.sampling_params import SamplingParams


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


def test_freed_blocks_join_the_queue_tail_first():
    kv = KVCacheManager(num_blocks=4, block_size=2, enable_prefix_caching=False)
    a = req("a", 6)
    kv.allocate_slots(a, 6)  # blocks 0, 1, 2
    kv.free(a)
    assert list(kv.pool.free_queue) == [3, 2, 1, 0]
    assert kv.pool.drain_step_changes() == ([0, 1, 2], [2, 1, 0])
