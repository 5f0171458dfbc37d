"""The block pool's free queue (a deque with stale entries left behind by prefix-cache hits) against the plain
ordered-dict queue it stands for: the same blocks handed out, in the same order, under random traffic."""

import random
from collections import OrderedDict

from enginetui.core.kv.block_pool import BlockPool


class PlainPool:
    """The free queue as an ordered dict of block ids, each operation done in place."""

    def __init__(self, num_blocks):
        self.free = OrderedDict.fromkeys(range(num_blocks))
        self.ref = [0] * num_blocks
        self.hash = [None] * num_blocks
        self.cached = {}  # hash -> block ids holding it, oldest first

    def get_new_blocks(self, n):
        out = [self.free.popitem(last=False)[0] for _ in range(n)]
        for b in out:
            self.uncache(b)
            self.ref[b] = 1
        return out

    def uncache(self, b):
        if self.hash[b] is not None:
            self.cached[self.hash[b]].remove(b)
            if not self.cached[self.hash[b]]:
                del self.cached[self.hash[b]]
            self.hash[b] = None

    def touch(self, ids):
        for b in ids:
            if self.ref[b] == 0:
                del self.free[b]
            self.ref[b] += 1

    def free_blocks(self, ids):
        head = []
        for b in ids:
            self.ref[b] -= 1
            if self.ref[b] == 0:
                if self.hash[b] is None:
                    head.append(b)
                else:
                    self.free[b] = None
        for b in reversed(head):
            self.free[b] = None
            self.free.move_to_end(b, last=False)


def test_the_free_queue_hands_out_blocks_as_an_ordered_dict_would():
    rng = random.Random(5)
    for num_blocks in (6, 24):
        pool, plain = BlockPool(num_blocks, True), PlainPool(num_blocks)
        tables: list[list[int]] = []  # each live request's blocks
        for _ in range(3000):
            op = rng.random()
            if op < 0.35 and plain.free:  # a request takes hits on cached content, then fresh blocks
                chain = [f"h{rng.randrange(8)}" for _ in range(rng.randrange(1, 4))]
                hits = [b.block_id for b in pool.lookup_chain(chain)]
                assert hits == [plain.cached[h][0] for h in chain[: len(hits)]] and (
                    len(hits) == len(chain) or chain[len(hits)] not in plain.cached
                )
                pool.touch([pool.blocks[b] for b in hits])
                plain.touch(hits)
                n = rng.randrange(0 if hits else 1, min(3, len(plain.free)) + 1)
                fresh = [b.block_id for b in pool.get_new_blocks(n)]
                assert fresh == plain.get_new_blocks(n)
                tables.append(hits + fresh)
            elif op < 0.6 and tables:  # a held block becomes findable by hash
                table = rng.choice(tables)
                b = rng.choice(table)
                h = f"h{rng.randrange(8)}"
                if plain.hash[b] is None:
                    plain.hash[b] = h
                    plain.cached.setdefault(h, []).append(b)
                pool.cache_blocks([pool.blocks[b]], [h])
            elif op < 0.65 and tables:  # a held block's content is forgotten (a failed step)
                b = rng.choice(rng.choice(tables))
                pool.uncache_block(pool.blocks[b])
                plain.uncache(b)
            elif tables:  # a request ends: its blocks freed, last first
                table = tables.pop(rng.randrange(len(tables)))
                pool.free_blocks([pool.blocks[b] for b in reversed(table)])
                plain.free_blocks(list(reversed(table)))
            assert pool.free_block_ids() == list(plain.free) and pool.num_free_blocks == len(plain.free)
            assert [b.ref_cnt for b in pool.blocks] == plain.ref
            assert [b.block_hash for b in pool.blocks] == plain.hash
        pool.check_invariants()
