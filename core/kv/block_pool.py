"""The pool of fixed-size KV blocks: reference counts, an eviction-ordered free queue, a hash index.

Every block is either referenced (ref_cnt > 0, owned by one or more requests) or in the free queue.
New blocks are taken from the head of the free queue. As in vLLM (0.23+), a freed block that holds
no cached content goes to the head (reused first, most recently freed first); a freed block still
findable by hash goes to the tail, so cached content is evicted least recently freed first.
With prefix caching every full block is findable by its hash, and so is every copy of the same
content (vLLM keeps them all: evicting one copy does not lose the content).
"""

from collections import OrderedDict

from enginetui.core.kv.block_hash import BlockHash


class KVBlock:
    """One physical block of the KV cache."""

    __slots__ = ("block_id", "ref_cnt", "block_hash")

    def __init__(self, block_id: int) -> None:
        self.block_id = block_id  # index into the KV cache tensors' first dimension
        self.ref_cnt = 0  # number of requests whose block table holds this block
        self.block_hash: BlockHash | None = None  # chained hash of its tokens once full and cached


class BlockPool:
    """Hands out and takes back blocks; records what changed for the step event."""

    def __init__(self, num_blocks: int, enable_caching: bool) -> None:
        self.num_blocks = num_blocks  # pool size
        self.enable_caching = enable_caching  # keep freed full blocks findable by hash
        self.blocks = [KVBlock(i) for i in range(num_blocks)]  # every block, by id
        self.free_queue: OrderedDict[int, None] = OrderedDict((i, None) for i in range(num_blocks))  # head taken first
        # block hash -> every block holding that content, oldest first (a lookup takes the oldest)
        self.cached: dict[BlockHash, dict[int, KVBlock]] = {}
        self.allocated_this_step: list[int] = []  # block ids handed out since the last drain
        self.freed_this_step: list[int] = []  # block ids whose last reference went since the last drain

    @property
    def num_free_blocks(self) -> int:
        return len(self.free_queue)

    def get_new_blocks(self, n: int) -> list[KVBlock]:
        """Take n blocks from the head of the free queue, evicting any cached contents."""
        if n > len(self.free_queue):
            raise RuntimeError(f"asked for {n} blocks with {len(self.free_queue)} free")
        out = []
        for _ in range(n):
            block_id, _ = self.free_queue.popitem(last=False)
            block = self.blocks[block_id]
            self.uncache_block(block)
            block.ref_cnt = 1
            out.append(block)
            self.allocated_this_step.append(block_id)
        return out

    def touch(self, blocks: list[KVBlock]) -> None:
        """Add a reference to cached blocks a new request reuses (taking free ones off the queue)."""
        for block in blocks:
            if block.ref_cnt == 0:
                del self.free_queue[block.block_id]
                self.allocated_this_step.append(block.block_id)
            block.ref_cnt += 1

    def free_blocks(self, blocks: list[KVBlock]) -> None:
        """Drop one reference from each block, `blocks` ordered by eviction priority (first evicted first).

        Unreferenced blocks with no cached content go to the head of the free queue (in that order),
        cached ones to the tail.
        """
        to_head: list[int] = []
        to_tail: list[int] = []
        for block in blocks:
            block.ref_cnt -= 1
            if block.ref_cnt == 0:
                (to_head if block.block_hash is None else to_tail).append(block.block_id)
                self.freed_this_step.append(block.block_id)
        for block_id in reversed(to_head):
            self.free_queue[block_id] = None
            self.free_queue.move_to_end(block_id, last=False)
        for block_id in to_tail:
            self.free_queue[block_id] = None

    def lookup(self, block_hash: BlockHash) -> KVBlock | None:
        """A block holding this content (the oldest copy), or None."""
        copies = self.cached.get(block_hash)
        return next(iter(copies.values())) if copies else None

    def cache_block(self, block: KVBlock, block_hash: BlockHash) -> None:
        """Make a full block findable by its hash (another copy of known content too)."""
        if block.block_hash is not None:
            return
        block.block_hash = block_hash
        self.cached.setdefault(block_hash, {})[block.block_id] = block

    def uncache_block(self, block: KVBlock) -> None:
        """Make a block unfindable by hash (evicted, or its contents are not to be trusted)."""
        if block.block_hash is None:
            return
        copies = self.cached[block.block_hash]
        del copies[block.block_id]
        if not copies:
            del self.cached[block.block_hash]
        block.block_hash = None

    def cached_free_block_ids(self) -> list[int]:
        """Free blocks that still hold findable content."""
        return [b.block_id for copies in self.cached.values() for b in copies.values() if b.ref_cnt == 0]

    def reset_cache(self) -> None:
        """Forget every cached hash."""
        for copies in self.cached.values():
            for block in copies.values():
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
        if referenced + len(self.free_queue) != self.num_blocks:
            raise AssertionError(
                f"pool accounting broken: {referenced} referenced + {len(self.free_queue)} free != {self.num_blocks}"
            )
        for block in self.blocks:
            if (block.ref_cnt == 0) != (block.block_id in self.free_queue) or block.ref_cnt < 0:
                raise AssertionError(
                    f"block {block.block_id} has ref_cnt {block.ref_cnt} but free={block.block_id in self.free_queue}"
                )
        indexed = 0
        for block_hash, copies in self.cached.items():
            for block in copies.values():
                if block.block_hash != block_hash:
                    raise AssertionError(f"hash index points at block {block.block_id} holding another hash")
            indexed += len(copies)
        if indexed != sum(1 for b in self.blocks if b.block_hash is not None):
            raise AssertionError("blocks carrying a hash and the hash index disagree")
