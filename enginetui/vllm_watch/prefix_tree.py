"""What vLLM's prefix cache holds, folded from its KV event batches: a tree of blocks per rank.

Every cached full block is known by its hash, and its hash chains to its parent's
(`parent_block_hash`): prompts that share a prefix share the first blocks of their chains, so
the cache is a forest whose branches are where prompts diverge. `BlockStored` grows it (a hash
already cached is a reuse report, counted on the block), `BlockRemoved` marks blocks evicted
(shown a while, then pruned), `AllBlocksCleared` empties it. Each data-parallel rank has its
own cache, so its own tree.

Pure Python: the folding is unit-tested directly.
"""

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from enginetui.vllm_watch.kv_events import AllBlocksCleared, BlockHash, BlockRemoved, BlockStored, KVEventBatch

EVICTED_SHOWN = 24  # evicted blocks kept on screen (marked) before the oldest are pruned

Decode = Callable[[Sequence[int]], str]  # token ids -> text (the served model's tokenizer)
BlockKey = tuple[str | None, int | None, BlockHash]  # (medium, KV cache group, hash): unique in one rank's cache


@dataclass(slots=True)
class CachedBlock:
    """One block vLLM cached (or did, until it was evicted)."""

    key: BlockKey  # identity in its rank's cache
    parent: BlockKey | None  # the block before it in its chain (None: the chain's first block)
    token_ids: tuple[int, ...]  # its tokens
    text: str | None  # its tokens decoded (None: no tokenizer)
    stored_ts: float  # vLLM's time of the (last) BlockStored
    evicted_ts: float | None = None  # vLLM's time of the BlockRemoved (None: still cached)
    times_stored: int = 1  # BlockStored reports of this hash (more than one: reused or cached again)

    @property
    def block_hash(self) -> BlockHash:
        return self.key[2]

    @property
    def cached(self) -> bool:
        return self.evicted_ts is None


@dataclass(frozen=True, slots=True)
class TreeRow:
    """One line of the tree as drawn: the block and the branch glyphs before it."""

    prefix: str  # tree glyphs ("├ ", "│ ", "└ ", "  ") before the block
    block: CachedBlock  # the block on this line
    orphan: bool  # the first of a chain whose parent is not cached (evicted and pruned, or stored before we listened)


@dataclass(slots=True)
class RankCache:
    """One data-parallel rank's prefix cache, as its KV events tell it."""

    rank: int  # data_parallel_rank of the batches folded in
    blocks: dict[BlockKey, CachedBlock] = field(default_factory=dict)  # every block shown, in order of first store
    children: dict[BlockKey, list[BlockKey]] = field(default_factory=dict)  # parent -> its children shown, in order
    evicted: deque[BlockKey] = field(default_factory=deque)  # evicted blocks still shown, oldest first
    block_size: int = 0  # tokens per block (from the latest BlockStored)
    num_stored: int = 0  # blocks newly cached (BlockStored of a hash not cached)
    num_restored: int = 0  # BlockStored reports of hashes already cached (vLLM's "full" report mode)
    num_removed: int = 0  # blocks evicted (BlockRemoved)
    num_removed_unseen: int = 0  # BlockRemoved of blocks stored before we listened
    num_cleared: int = 0  # AllBlocksCleared events
    num_batches: int = 0  # batches folded in
    last_seq: int | None = None  # sequence number of the last batch folded in
    last_ts: float | None = None  # vLLM's time of the last batch

    @property
    def num_cached(self) -> int:
        return len(self.blocks) - len(self.evicted)

    def apply(self, batch: KVEventBatch, decode: Decode | None) -> None:
        """Fold one batch's events, in order."""
        for event in batch.events:
            if isinstance(event, BlockStored):
                self._store(event, batch.ts, decode)
            elif isinstance(event, BlockRemoved):
                self._remove(event, batch.ts)
            elif isinstance(event, AllBlocksCleared):
                self.clear()
                self.num_cleared += 1
        self.num_batches += 1
        self.last_seq, self.last_ts = batch.seq, batch.ts

    def clear(self) -> None:
        """Forget every block (the cache was reset)."""
        self.blocks.clear()
        self.children.clear()
        self.evicted.clear()

    def redecode(self, decode: Decode) -> None:
        """Decode every block's tokens again (a tokenizer became available)."""
        for block in self.blocks.values():
            block.text = decode(block.token_ids)

    def roots(self) -> list[CachedBlock]:
        """Blocks whose parent is not shown: first blocks of chains, and orphans."""
        return [b for b in self.blocks.values() if b.parent is None or b.parent not in self.blocks]

    def rows(self, limit: int | None = None) -> list[TreeRow]:
        """The tree, depth first; chains holding a cached block first, in order of first store, then
        chains wholly evicted (until pruned); at most `limit` rows.

        A block with one child continues on the next line at the same indent; indentation grows
        only where chains branch (├ └), so long prompts stay narrow."""
        live: list[TreeRow] = []
        evicted: list[TreeRow] = []  # rows of chains with no block cached, drawn after the live ones
        for root in self.roots():
            chain = []
            for row in self._walk(root, "", root.parent is not None):
                chain.append(row)
                if limit is not None and len(live) + len(chain) >= limit:
                    break
            (live if any(row.block.cached for row in chain) else evicted).extend(chain)
            if limit is not None and len(live) >= limit:
                return live[:limit]
        return (live + evicted)[:limit]

    # ---- internals -----------------------------------------------------------------------

    def _walk(self, block: CachedBlock, prefix: str, orphan: bool) -> Iterator[TreeRow]:
        stack = [(block, prefix, prefix, orphan)]  # (block, glyphs on its line, glyphs under it, orphan)
        while stack:
            node, line, under, is_orphan = stack.pop()
            yield TreeRow(line, node, is_orphan)
            kids = [self.blocks[k] for k in self.children.get(node.key, ()) if k in self.blocks]
            if len(kids) == 1:
                stack.append((kids[0], under, under, False))
                continue
            for i in reversed(range(len(kids))):
                last = i == len(kids) - 1
                stack.append((kids[i], under + ("└ " if last else "├ "), under + ("  " if last else "│ "), False))

    def _store(self, event: BlockStored, ts: float, decode: Decode | None) -> None:
        self.block_size = event.block_size
        medium, group = event.medium, event.group_idx
        parent = None if event.parent_block_hash is None else (medium, group, event.parent_block_hash)
        size = event.block_size
        for i, block_hash in enumerate(event.block_hashes):
            key = (medium, group, block_hash)
            tokens = tuple(event.token_ids[i * size : (i + 1) * size])
            block = self.blocks.get(key)
            if block is None:
                self.blocks[key] = CachedBlock(key, parent, tokens, decode(tokens) if decode else None, ts)
                if parent is not None:
                    self.children.setdefault(parent, []).append(key)
                self.num_stored += 1
            elif block.cached:
                block.times_stored += 1
                self.num_restored += 1
            else:  # evicted, then cached again
                block.evicted_ts, block.stored_ts = None, ts
                block.times_stored += 1
                self.evicted.remove(key)
                self.num_stored += 1
            parent = key

    def _remove(self, event: BlockRemoved, ts: float) -> None:
        for block_hash in event.block_hashes:
            block = self.blocks.get((event.medium, event.group_idx, block_hash))
            if block is None or not block.cached:
                self.num_removed_unseen += block is None
                continue
            block.evicted_ts = ts
            self.evicted.append(block.key)
            self.num_removed += 1
        self._prune()

    def _prune(self) -> None:
        """Drop the oldest evicted blocks beyond EVICTED_SHOWN; one whose children are still
        shown stays (it carries their chain) until they are gone."""
        excess = len(self.evicted) - EVICTED_SHOWN
        for key in list(self.evicted):
            if excess <= 0:
                return
            if any(k in self.blocks for k in self.children.get(key, ())):
                continue
            self.evicted.remove(key)
            block = self.blocks.pop(key)
            self.children.pop(key, None)
            if block.parent is not None and block.parent in self.children:
                self.children[block.parent].remove(key)
            excess -= 1


@dataclass(slots=True)
class PrefixCaches:
    """Every rank's prefix cache, and the tokenizer that decodes their blocks."""

    ranks: dict[int, RankCache] = field(default_factory=dict)  # data_parallel_rank -> its cache
    decode: Decode | None = None  # token ids -> text (None: show token ids)

    def apply(self, batch: KVEventBatch) -> RankCache:
        """Fold one batch into its rank's cache; returns that cache."""
        cache = self.rank(batch.data_parallel_rank)
        cache.apply(batch, self.decode)
        return cache

    def rank(self, rank: int) -> RankCache:
        if rank not in self.ranks:
            self.ranks[rank] = RankCache(rank)
            self.ranks = dict(sorted(self.ranks.items()))
        return self.ranks[rank]

    def start_over(self, rank: int) -> None:
        """A new publisher for `rank` (the server restarted): an empty cache, its counts from zero."""
        self.ranks[rank] = RankCache(rank)

    def set_decoder(self, decode: Decode) -> None:
        self.decode = decode
        for cache in self.ranks.values():
            cache.redecode(decode)
