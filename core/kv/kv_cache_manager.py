"""Per-request block tables on top of the block pool: allocate_slots / free / prefix-cache lookup."""

from enginetui.core.ceil_div import cdiv
from enginetui.core.kv.block_hash import update_block_hashes
from enginetui.core.kv.block_pool import BlockPool, KVBlock
from enginetui.core.request import Request


class KVCacheManager:
    """Decides which physical blocks back each request's logical blocks."""

    def __init__(self, num_blocks: int, block_size: int, enable_prefix_caching: bool) -> None:
        self.block_size = block_size  # tokens per block
        self.enable_prefix_caching = enable_prefix_caching  # look up and publish full blocks by hash
        self.pool = BlockPool(num_blocks, enable_prefix_caching)  # the physical blocks
        self.req_to_blocks: dict[str, list[KVBlock]] = {}  # request id -> its block table
        self.num_cached_blocks: dict[str, int] = {}  # request id -> how many of its blocks are published
        # Prefix-cache hit accounting at admission, as vLLM's PrefixCacheStats: requests admitted for
        # the first time count as queries / hits; re-admissions after a preemption separately.
        self.prefix_queries = 0  # tokens of first admissions looked up in the prefix cache
        self.prefix_hits = 0  # of which served from the cache
        self.preempted_prefix_queries = 0  # tokens of re-admissions (after a preemption) looked up
        self.preempted_prefix_hits = 0  # of which served from the cache

    @property
    def num_blocks(self) -> int:
        return self.pool.num_blocks

    def block_ids(self, request_id: str) -> list[int]:
        return [b.block_id for b in self.req_to_blocks.get(request_id, ())]

    def forget_unwritten_blocks(self, request: Request, num_written: int) -> list[KVBlock]:
        """A step writing the request's KV failed: only its first `num_written` tokens hold KV, so
        its later blocks stop being findable by hash. Returns the blocks forgotten."""
        blocks = self.req_to_blocks.get(request.request_id, [])
        first = num_written // self.block_size  # the first block not wholly written
        forgotten = [b for b in blocks[first:] if b.block_hash is not None]
        for block in forgotten:
            self.pool.uncache_block(block)
        if request.request_id in self.num_cached_blocks:
            self.num_cached_blocks[request.request_id] = min(self.num_cached_blocks[request.request_id], first)
        return forgotten

    def get_computed_blocks(self, request: Request) -> tuple[list[KVBlock], int]:
        """The longest chain of cached full blocks matching the request's tokens, and the tokens it covers.

        The last token is never taken from the cache: its logits are needed to sample.
        """
        if not self.enable_prefix_caching:
            return [], 0
        hashes = update_block_hashes(request, self.block_size)
        max_blocks = (request.num_tokens - 1) // self.block_size
        blocks = self.pool.lookup_chain(hashes[:max_blocks])
        return blocks, len(blocks) * self.block_size

    def cached_free_block_ids(self) -> list[int]:
        """Free blocks that still hold a findable prefix (reusable by a hit until evicted)."""
        return self.pool.cached_free_block_ids()

    def record_lookup(self, request: Request, num_hits: int) -> None:
        """Count an admitted request's prefix-cache lookup (its tokens, and how many were hits)."""
        if not self.enable_prefix_caching:
            return
        if request.num_preemptions:
            self.preempted_prefix_queries += request.num_tokens
            self.preempted_prefix_hits += num_hits
        else:
            self.prefix_queries += request.num_tokens
            self.prefix_hits += num_hits

    def can_ever_fit(self, num_tokens: int) -> bool:
        return cdiv(num_tokens, self.block_size) <= self.pool.num_blocks

    def allocate_slots(
        self,
        request: Request,
        num_new_tokens: int,
        new_computed_blocks: list[KVBlock] | None = None,
        full_sequence_must_fit: bool = False,
    ) -> list[KVBlock] | None:
        """Give the request enough blocks for `num_new_tokens` more tokens, or None if the pool can't.

        `new_computed_blocks` are prefix-cache hits being attached at admission. With
        `full_sequence_must_fit` (vLLM's scheduler_reserve_full_isl admission gate) the request is
        refused unless blocks for all its current tokens fit, not only for this step's.
        """
        if not new_computed_blocks and not full_sequence_must_fit:  # a running request: most steps need no block
            held = self.req_to_blocks.get(request.request_id)
            end = request.num_computed_tokens + num_new_tokens
            if held is not None and cdiv(end, self.block_size) <= len(held):
                if self.enable_prefix_caching:  # only blocks of known tokens (not placeholders of steps in flight)
                    self._publish_full_blocks(request, held, min(end, request.num_tokens))
                return []
        computed = new_computed_blocks or []
        blocks = self.req_to_blocks.get(request.request_id, [])
        num_computed = request.num_computed_tokens + len(computed) * self.block_size
        num_held = len(blocks) + len(computed)
        # Cache hits sitting in the free queue stop being free once attached.
        num_free_hits = sum(1 for b in computed if b.ref_cnt == 0)
        free = self.pool.num_free_blocks
        if (
            full_sequence_must_fit
            and max(cdiv(request.num_tokens, self.block_size) - num_held, 0) + num_free_hits > free
        ):
            return None
        num_needed = max(cdiv(num_computed + num_new_tokens, self.block_size) - num_held, 0)
        if num_needed + num_free_hits > free:
            return None
        if computed:
            self.pool.touch(computed)
            self.num_cached_blocks[request.request_id] = len(computed)  # hits are published already
        blocks = self.req_to_blocks.setdefault(request.request_id, blocks)
        blocks.extend(computed)
        new_blocks = self.pool.get_new_blocks(num_needed)
        blocks.extend(new_blocks)
        if self.enable_prefix_caching:  # only blocks of known tokens (not placeholders of steps in flight)
            self._publish_full_blocks(request, blocks, min(num_computed + num_new_tokens, request.num_tokens))
        return new_blocks

    def publish_computed(self, request: Request, num_tokens: int) -> None:
        """Asynchronous scheduling: a sampled token became known; publish the blocks its first
        `num_tokens` tokens fill (blocks holding placeholders of steps in flight wait)."""
        if self.enable_prefix_caching and request.request_id in self.req_to_blocks:
            self._publish_full_blocks(request, self.req_to_blocks[request.request_id], num_tokens)

    def _publish_full_blocks(self, request: Request, blocks: list[KVBlock], num_tokens: int) -> None:
        """Make the request's blocks that will be full after this step findable by hash."""
        start = self.num_cached_blocks.get(request.request_id, 0)
        end = num_tokens // self.block_size
        if end <= start:
            return
        hashes = update_block_hashes(request, self.block_size)
        self.pool.cache_blocks(blocks[start:end], hashes[start:end])
        self.num_cached_blocks[request.request_id] = end

    def free(self, request: Request) -> int:
        """Return all of the request's blocks to the pool (tail first, so it is evicted first). Returns the count."""
        blocks = self.req_to_blocks.pop(request.request_id, [])
        self.num_cached_blocks.pop(request.request_id, None)
        self.pool.free_blocks(list(reversed(blocks)))
        return len(blocks)

    def reset_prefix_cache(self) -> bool:
        """Forget every cached block, as vLLM does: only when no block is in use. True if it reset."""
        if self.pool.num_free_blocks != self.pool.num_blocks:
            return False
        self.pool.reset_cache()
        return True

    def check_invariants(self) -> None:
        """Pool accounting holds and every block's ref count equals the number of tables holding it."""
        self.pool.check_invariants()
        counts: dict[int, int] = {}
        for blocks in self.req_to_blocks.values():
            for b in blocks:
                counts[b.block_id] = counts.get(b.block_id, 0) + 1
        for block in self.pool.blocks:
            if counts.get(block.block_id, 0) != block.ref_cnt:
                raise AssertionError(
                    f"block {block.block_id}: ref_cnt {block.ref_cnt} but held by {counts.get(block.block_id, 0)} tables"
                )
