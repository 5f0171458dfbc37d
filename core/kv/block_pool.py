"""The pool of fixed-size KV blocks: reference counts, an eviction-ordered free queue, a hash index.

Every block is either referenced (ref_cnt > 0, owned by one or more requests) or in the free queue.
New blocks are taken from the head of the free queue. As in vLLM (0.23+), a freed block that holds
no cached content goes to the head (reused first, most recently freed first); a freed block still
findable by hash goes to the tail, so cached content is evicted least recently freed first.
With prefix caching every full block is findable by its hash, and so is every copy of the same
content (vLLM keeps them all: evicting one copy does not lose the content).
"""

from collections import deque

from enginetui.core.kv.block_hash import BlockHash


class KVBlock:
    """One physical block of the KV cache."""

    __slots__ = ("block_id", "ref_cnt", "block_hash", "num_stale")

    def __init__(self, block_id: int) -> None:
        self.block_id = block_id  # index into the KV cache tensors' first dimension
        self.ref_cnt = 0  # number of requests whose block table holds this block
        self.block_hash: BlockHash | None = None  # chained hash of its tokens once full and cached
        self.num_stale = 0  # its entries in the free queue left behind when taken out of the middle (BlockPool)


class BlockPool:
    """Hands out and takes back blocks; records what changed for the step event.

    The free queue is a deque of blocks. A free block taken out of its middle (a prefix-cache hit) leaves its
    entry behind, counted in the block's num_stale: a block's stale entries always lie before its live one
    (blocks with stale entries are re-queued at the tail), so the head's entry for a block with num_stale is
    stale and is dropped. An ordered dict would remove in place, at several times the cost per block.
    """

    def __init__(self, num_blocks: int, enable_caching: bool) -> None:
        self.num_blocks = num_blocks  # pool size
        self.enable_caching = enable_caching  # keep freed full blocks findable by hash
        self.blocks = list(map(KVBlock, range(num_blocks)))  # every block, by id
        self.free_queue: deque[KVBlock] = deque(self.blocks)  # head taken first; with stale entries (above)
        self.num_free = num_blocks  # blocks in the free queue (its live entries)
        self.num_stale = 0  # stale entries in the free queue
        # block hash -> every block holding that content, oldest first (lookup_chain takes the oldest)
        self.cached: dict[BlockHash, list[KVBlock]] = {}
        self.allocated_this_step: list[int] = []  # block ids handed out since the last drain
        self.freed_this_step: list[int] = []  # block ids whose last reference went since the last drain

    @property
    def num_free_blocks(self) -> int:
        return self.num_free

    def free_block_ids(self) -> list[int]:
        """The free blocks in queue order (the head, taken first, first)."""
        seen: dict[int, int] = {}  # block id -> its stale entries passed so far
        out = []
        for block in self.free_queue:
            passed = seen.get(block.block_id, 0)
            if passed < block.num_stale:
                seen[block.block_id] = passed + 1
            else:
                out.append(block.block_id)
        return out

    def get_new_blocks(self, n: int) -> list[KVBlock]:
        """Take n blocks from the head of the free queue, evicting any cached contents."""
        if n > self.num_free:
            raise RuntimeError(f"asked for {n} blocks with {self.num_free} free")
        pop = self.free_queue.popleft
        out: list[KVBlock] = []
        append = out.append
        while len(out) < n:
            block = pop()
            if block.num_stale:
                block.num_stale -= 1
                self.num_stale -= 1
                continue
            if block.block_hash is not None:
                self.uncache_block(block)
            block.ref_cnt = 1
            append(block)
        self.num_free -= n
        self.allocated_this_step += [block.block_id for block in out]
        return out

    def touch(self, blocks: list[KVBlock]) -> None:
        """Add a reference to cached blocks a new request reuses (taking free ones off the queue)."""
        for block in blocks:
            if block.ref_cnt == 0:
                block.num_stale += 1  # its entry stays behind
                self.num_stale += 1
                self.num_free -= 1
                self.allocated_this_step.append(block.block_id)
            block.ref_cnt += 1
        if self.num_stale > self.num_blocks:
            self._drop_stale()

    def free_blocks(self, blocks: list[KVBlock]) -> None:
        """Drop one reference from each block, `blocks` ordered by eviction priority (first evicted first).

        Unreferenced blocks with no cached content go to the head of the free queue (in that order),
        cached ones to the tail.
        """
        to_head: list[KVBlock] = []
        to_tail: list[KVBlock] = []
        freed = self.freed_this_step
        for block in blocks:
            block.ref_cnt -= 1
            if not block.ref_cnt:
                (to_head if block.block_hash is None else to_tail).append(block)
                freed.append(block.block_id)
        if any(block.num_stale for block in to_head):  # (uncached while held) its stale entries must not follow it
            self._drop_stale()
        queue = self.free_queue
        queue.extendleft(reversed(to_head))
        queue.extend(to_tail)
        self.num_free += len(to_head) + len(to_tail)

    def _drop_stale(self) -> None:
        """Rebuild the free queue without its stale entries."""
        live: deque[KVBlock] = deque()
        for block in self.free_queue:
            if block.num_stale:
                block.num_stale -= 1
            else:
                live.append(block)
        self.free_queue = live
        self.num_stale = 0

    def lookup_chain(self, block_hashes: list[BlockHash]) -> list[KVBlock]:
        """A block holding each content (the oldest copy), up to the first content no block holds."""
        cached = self.cached
        out = []
        for block_hash in block_hashes:
            copies = cached.get(block_hash)
            if not copies:
                break
            out.append(copies[0])
        return out

    def cache_blocks(self, blocks: list[KVBlock], hashes: list[BlockHash]) -> None:
        """Make full blocks findable by their hashes, in order (another copy of known content too)."""
        cached = self.cached
        for block, block_hash in zip(blocks, hashes):
            if block.block_hash is None:
                block.block_hash = block_hash
                copies = cached.get(block_hash)
                if copies is None:
                    cached[block_hash] = [block]
                else:
                    copies.append(block)

    def uncache_block(self, block: KVBlock) -> None:
        """Make a block unfindable by hash (evicted, or its contents are not to be trusted)."""
        if block.block_hash is None:
            return
        copies = self.cached[block.block_hash]
        if len(copies) == 1:
            del self.cached[block.block_hash]
        else:
            copies.remove(block)
        block.block_hash = None

    def cached_free_block_ids(self) -> list[int]:
        """Free blocks that still hold findable content."""
        return [b.block_id for copies in self.cached.values() for b in copies if b.ref_cnt == 0]

    def reset_cache(self) -> None:
        """Forget every cached hash."""
        for copies in self.cached.values():
            for block in copies:
                block.block_hash = None
        self.cached.clear()

    def drain_step_changes(self) -> tuple[list[int], list[int]]:
        """The blocks allocated and freed since the last call."""
        allocated, freed = self.allocated_this_step, self.freed_this_step
        self.allocated_this_step, self.freed_this_step = [], []
        return allocated, freed

    def num_referenced_blocks(self) -> int:
        return sum(1 for b in self.blocks if b.ref_cnt > 0)

    def check_invariants(self) -> None:
        """free + referenced == total, the free queue holds exactly the unreferenced blocks, and the
        hash index holds exactly the blocks that carry a hash."""
        referenced = self.num_referenced_blocks()
        free_ids = self.free_block_ids()
        if referenced + len(free_ids) != self.num_blocks or len(free_ids) != self.num_free:
            raise AssertionError(
                f"pool accounting broken: {referenced} referenced + {len(free_ids)} free ({self.num_free} counted) "
                f"!= {self.num_blocks}"
            )
        if len(self.free_queue) != self.num_free + self.num_stale:
            raise AssertionError(f"the free queue holds {len(self.free_queue)} entries, not {self.num_free} + stale")
        free = set(free_ids)
        for block in self.blocks:
            if (block.ref_cnt == 0) != (block.block_id in free) or block.ref_cnt < 0:
                raise AssertionError(
                    f"block {block.block_id} has ref_cnt {block.ref_cnt} but free={block.block_id in free}"
                )
        indexed = 0
        for block_hash, copies in self.cached.items():
            for block in copies:
                if block.block_hash != block_hash:
                    raise AssertionError(f"hash index points at block {block.block_id} holding another hash")
            indexed += len(copies)
        if indexed != sum(1 for b in self.blocks if b.block_hash is not None):
            raise AssertionError("blocks carrying a hash and the hash index disagree")
