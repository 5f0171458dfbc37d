"""The pool of fixed-size KV blocks: reference counts, an eviction-ordered free queue, a hash index.

Every block is either referenced (ref_cnt > 0, owned by one or more requests) or in the free queue.
With prefix caching a free block may still hold a full block of tokens under its hash; it is
reused by a later request with the same prefix, or evicted (least recently freed first) when the
pool needs a fresh block.
"""

from collections import OrderedDict


class KVBlock:
    """One physical block of the KV cache."""

    __slots__ = ("block_id", "ref_cnt", "block_hash")

    def __init__(self, block_id: int) -> None:
        self.block_id = block_id  # index into the KV cache tensors' first dimension
        self.ref_cnt = 0  # number of requests whose block table holds this block
        self.block_hash: int | None = None  # chained hash of its tokens once full and cached


class BlockPool:
    """Hands out and takes back blocks; records what changed for the step event."""

    def __init__(self, num_blocks: int, enable_caching: bool) -> None:
        self.num_blocks = num_blocks  # pool size
        self.enable_caching = enable_caching  # keep freed full blocks findable by hash
        self.blocks = [KVBlock(i) for i in range(num_blocks)]  # every block, by id
        self.free_queue: OrderedDict[int, None] = OrderedDict((i, None) for i in range(num_blocks))  # head evicted first
        self.cached: dict[int, KVBlock] = {}  # block hash -> the block holding it
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
            if block.block_hash is not None:
                del self.cached[block.block_hash]
                block.block_hash = None
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
        """Drop one reference from each block; unreferenced ones join the free queue's tail, in order."""
        for block in blocks:
            block.ref_cnt -= 1
            if block.ref_cnt == 0:
                self.free_queue[block.block_id] = None
                self.freed_this_step.append(block.block_id)

    def lookup(self, block_hash: int) -> KVBlock | None:
        return self.cached.get(block_hash)

    def cache_block(self, block: KVBlock, block_hash: int) -> bool:
        """Make a full block findable by its hash (the first block with a given hash wins). True if it was."""
        if block.block_hash is None and block_hash not in self.cached:
            block.block_hash = block_hash
            self.cached[block_hash] = block
            return True
        return False

    def uncache_block(self, block: KVBlock) -> None:
        """Make a block unfindable by hash (its contents are not to be trusted)."""
        if block.block_hash is not None:
            if self.cached.get(block.block_hash) is block:
                del self.cached[block.block_hash]
            block.block_hash = None

    def cached_free_block_ids(self) -> list[int]:
        return [b.block_id for b in self.cached.values() if b.ref_cnt == 0]

    def reset_cache(self) -> None:
        """Forget every cached hash; blocks keep their owners."""
        for block in self.cached.values():
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
        """free + referenced == total, and the free queue holds exactly the unreferenced blocks."""
        referenced = self.num_referenced_blocks()
        if referenced + len(self.free_queue) != self.num_blocks:
            raise AssertionError(
                f"pool accounting broken: {referenced} referenced + {len(self.free_queue)} free != {self.num_blocks}"
            )
        for block in self.blocks:
            if (block.ref_cnt == 0) != (block.block_id in self.free_queue) or block.ref_cnt < 0:
                raise AssertionError(f"block {block.block_id} has ref_cnt {block.ref_cnt} but free={block.block_id in self.free_queue}")
        for block_hash, block in self.cached.items():
            if block.block_hash != block_hash:
                raise AssertionError(f"hash index points at block {block.block_id} holding another hash")
