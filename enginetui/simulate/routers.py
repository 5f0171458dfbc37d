"""The routers a simulated fleet runs behind: vllm-router's policies as its source implements them (with the
defaults its command line gives them), Vidur's least outstanding requests, and llm-d's precise prefix-cache
scoring.

A router sees what the real one sees: its own count of requests in flight per replica (routed, not yet
finished: vllm-router's worker load), the request's prompt, and (prefix-score only, as llm-d reads
vLLM's KV events and metrics) each replica's prefix cache, waiting queue and KV usage. Prompts are
token ids, not text: the trees and hashes work on the prompt's chained 16-token block hashes (the
engine's own, enginetui.core.kv.block_hash), where vllm-router works on characters.
"""

import hashlib
import random
from bisect import bisect_left
from itertools import islice, takewhile
from typing import Protocol

from enginetui.core.kv.block_hash import update_block_hashes
from enginetui.core.request import Request

ROUTERS = (
    "round-robin",
    "random",
    "power-of-two",
    "consistent-hash",
    "cache-aware",
    "least-outstanding",
    "prefix-score",
)  # --router choices

# vllm-router's command-line defaults (src/main.rs) for cache_aware and consistent_hash
CACHE_THRESHOLD = 0.3  # --cache-threshold: least matched share of the prompt for cache affinity
BALANCE_ABS_THRESHOLD = 64  # --balance-abs-threshold: load gap past which the fleet is imbalanced ...
BALANCE_REL_THRESHOLD = 1.5  # --balance-rel-threshold: ... and max load past min load times this
EVICTION_INTERVAL_S = 120.0  # --eviction-interval: seconds between tree evictions
MAX_TREE_CHARS = 2**26  # --max-tree-size, in characters per replica
CHARS_PER_TOKEN = 4  # to state that limit in tokens
VIRTUAL_NODES = 160  # consistent_hash's virtual nodes per replica
# llm-d's precise-prefix-cache-aware guide: the scorers' weights, summed and maxed over replicas
PREFIX_WEIGHT, KV_UTILIZATION_WEIGHT, QUEUE_WEIGHT = 3.0, 2.0, 2.0


class Replica(Protocol):
    """What a router may read of a replica."""

    index: int  # position in the fleet

    def load(self) -> int:
        """Requests routed to it and not yet finished (the router's own count)."""

    def cached_prefix_blocks(self, block_hashes: list[bytes]) -> int:
        """How many leading blocks of these hashes its prefix cache holds now."""

    def num_waiting(self) -> int:
        """Requests in its waiting queue."""

    def kv_usage(self) -> float:
        """Share of its KV pool in use (0..1)."""


class Router:
    """Picks a replica for each request."""

    name = ""
    needs_tokens = False  # reads the prompt's tokens (the fleet builds real ones then)
    asks_replicas = False  # has every replica's front-end tokenize a prompt before it routes it (--router-tokenize-ms)

    def __init__(self, num_replicas: int, block_size: int, seed: int = 0) -> None:
        self.num_replicas = num_replicas
        self.block_size = block_size
        self.rng = random.Random(seed)
        self.explain = False  # say why each choice was made (`why`): for a watched or recorded fleet
        self.why = ""  # the latest choice's reason, in words (set only when `explain`)

    def route(self, request: Request, replicas: list[Replica], now: float) -> int:
        raise NotImplementedError

    def block_hashes(self, request: Request) -> list[bytes]:
        return update_block_hashes(request, self.block_size)


class RoundRobin(Router):
    """vllm-router src/policies/round_robin.rs: a counter modulo the replicas."""

    name = "round-robin"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.counter = 0

    def route(self, request, replicas, now):
        k = self.counter % len(replicas)
        if self.explain:
            self.why = f"request {self.counter} of the count, modulo {len(replicas)}"
        self.counter += 1
        return k


class RandomRouter(Router):
    """vllm-router src/policies/random.rs: uniform."""

    name = "random"

    def route(self, request, replicas, now):
        if self.explain:
            self.why = "drawn at random"
        return self.rng.randrange(len(replicas))


class PowerOfTwo(Router):
    """vllm-router src/policies/power_of_two.rs: two distinct replicas at random, the lower load (the first on a
    tie). Its polled external loads are not modelled (vLLM serves no /get_load): the router's own count."""

    name = "power-of-two"

    def route(self, request, replicas, now):
        if len(replicas) == 1:
            return 0
        a = self.rng.randrange(len(replicas))
        b = self.rng.randrange(len(replicas))
        while b == a:
            b = self.rng.randrange(len(replicas))
        load_a, load_b = replicas[a].load(), replicas[b].load()
        if self.explain:
            self.why = f"drew {a} (load {load_a}) and {b} (load {load_b}): the lighter"
        return a if load_a <= load_b else b


class LeastOutstanding(Router):
    """Vidur's least outstanding requests: the lowest load (the first on a tie)."""

    name = "least-outstanding"

    def route(self, request, replicas, now):
        if self.explain:
            loads = [r.load() for r in replicas]
            self.why = f"the fewest in flight ({min(loads)}; loads {_loads(loads)})"
        return min(range(len(replicas)), key=lambda k: replicas[k].load())


class ConsistentHash(Router):
    """vllm-router src/policies/consistent_hash.rs: a ring of VIRTUAL_NODES points per replica; a request goes to
    the first point at or after its key's hash. With no session or user id (traces carry none) the key is
    the request body's hash, so equal prompts meet. A 64-bit BLAKE2b stands in for its FurcHash."""

    name = "consistent-hash"
    needs_tokens = True

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        ring = sorted(
            (_hash64(f"replica-{k}:{v}".encode()), k) for k in range(self.num_replicas) for v in range(VIRTUAL_NODES)
        )
        self.points = [p for p, _ in ring]
        self.owners = [k for _, k in ring]

    def route(self, request, replicas, now):
        from array import array

        key = _hash64(array("q", request.prompt_token_ids).tobytes())
        i = bisect_left(self.points, key)
        if self.explain:
            self.why = f"the prompt's hash {key:016x} on the ring"
        return self.owners[i % len(self.points)]


class CacheAware(Router):
    """vllm-router src/policies/cache_aware.rs. Imbalanced (max load - min load > BALANCE_ABS_THRESHOLD and
    max > min * BALANCE_REL_THRESHOLD): the lowest load. Otherwise the replica whose tree matches the most of
    the prompt when that is over CACHE_THRESHOLD of it, else the lowest load (the first on a tie). The prompt
    is then inserted in the chosen replica's tree; every EVICTION_INTERVAL_S a replica's tree past its size
    limit loses its least recently used blocks."""

    name = "cache-aware"
    needs_tokens = True
    # vllm-router 0.1.17 asks each worker to render (/v1/completions/render), else tokenize (/tokenize), the prompt
    # before it routes it (its metric vllm_router_kv_routing_inputs_total; the workers' access logs)
    asks_replicas = True

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # each replica's tree: block hash -> when it was inserted (the count of routings), least recent first
        self.held: list[dict[bytes, int]] = [{} for _ in range(self.num_replicas)]
        self.count = 0  # routings so far
        # block hash -> the replica that inserted it last (after an eviction, its first other holder); kept only
        # from the first eviction on: until then each tree holds every block before each block it holds (a
        # prompt is inserted whole), so a tree's match is found by bisection and the latest inserter by `held`
        self.last: dict[bytes, int] | None = None
        self.max_blocks = MAX_TREE_CHARS // (CHARS_PER_TOKEN * self.block_size)  # the size limit, in blocks
        self.next_eviction = EVICTION_INTERVAL_S

    def route(self, request, replicas, now):
        while now >= self.next_eviction:
            self._evict()
            self.next_eviction += EVICTION_INTERVAL_S
        loads = [r.load() for r in replicas]
        lowest, highest = min(loads), max(loads)
        least = loads.index(lowest)
        hashes = self.block_hashes(request)
        last = self.last
        if last is None:
            depths = [bisect_left(range(len(hashes)), True, key=lambda j: hashes[j] not in held) for held in self.held]
            matched = max(depths)
        else:
            matched = len(list(takewhile(last.__contains__, hashes)))
        if highest - lowest > BALANCE_ABS_THRESHOLD and highest > lowest * BALANCE_REL_THRESHOLD:
            choice = least
            if self.explain:
                self.why = f"imbalanced (loads {_loads(loads)}): the least loaded"
        else:
            rate = matched * self.block_size / max(request.num_prompt_tokens, 1)
            # the deepest match's latest inserter (the Rust tree takes the first tenant it finds there)
            hit = matched and rate > CACHE_THRESHOLD
            choice = least
            if hit:
                deepest = hashes[matched - 1]
                choice = last[deepest] if last is not None else max(self._holders(deepest))[1]
            if self.explain:
                match = f"matched {matched * self.block_size} of {request.num_prompt_tokens} tokens ({rate:.0%})"
                self.why = (
                    f"{match}, over {CACHE_THRESHOLD:.0%}"
                    if hit
                    else f"{match}, not over {CACHE_THRESHOLD:.0%}: the least loaded (loads {_loads(loads)})"
                )
        held = self.held[choice]
        if last is None:
            for h in hashes[: depths[choice]]:  # blocks it held already become its most recent
                del held[h]
        else:
            last.update(dict.fromkeys(hashes, choice))
            for h in held.keys() & hashes:
                del held[h]
        held.update(dict.fromkeys(hashes, self.count))
        self.count += 1
        return choice

    def _holders(self, h: bytes) -> list[tuple[int, int]]:
        """(when inserted, replica) of each tree holding block `h`."""
        return [(held[h], k) for k, held in enumerate(self.held) if h in held]

    def _evict(self) -> None:
        """Replicas past the size limit lose their least recently inserted blocks."""
        for k, held in enumerate(self.held):
            excess = len(held) - self.max_blocks
            if excess <= 0:
                continue
            if self.last is None:  # the first eviction: each block's latest inserter, from the trees
                when: dict[bytes, int] = {}
                self.last = {}
                for j, tree in enumerate(self.held):
                    for h, t in tree.items():
                        if t > when.get(h, -1):
                            when[h] = t
                            self.last[h] = j
            last = self.last
            for h in list(islice(held, excess)):
                del held[h]
                if last.get(h) == k:  # another holder (the first) answers for it now, if any
                    others = [j for j, other in enumerate(self.held) if h in other]
                    if others:
                        last[h] = others[0]
                    else:
                        del last[h]


class PrefixScore(Router):
    """llm-d's precise prefix-cache scheduling (its precise-prefix-cache-aware guide's profile): per replica,
    PREFIX_WEIGHT x the prompt blocks its KV cache holds now (as a share of the prompt's blocks)
    + KV_UTILIZATION_WEIGHT x (1 - KV usage) + QUEUE_WEIGHT x (max waiting - its waiting) / (max - min)
    (1 when all are equal); the highest total, ties at random."""

    name = "prefix-score"
    needs_tokens = True

    def route(self, request, replicas, now):
        hashes = self.block_hashes(request)
        full = max(len(hashes), 1)
        queues = [r.num_waiting() for r in replicas]
        low, high = min(queues), max(queues)
        scores = []
        for r, q in zip(replicas, queues):
            prefix = r.cached_prefix_blocks(hashes) / full
            queue = 1.0 if high == low else (high - q) / (high - low)
            scores.append(PREFIX_WEIGHT * prefix + KV_UTILIZATION_WEIGHT * (1 - r.kv_usage()) + QUEUE_WEIGHT * queue)
        best = max(scores)
        choice = self.rng.choice([k for k, s in enumerate(scores) if s == best])
        if self.explain:
            self.why = f"the best score {best:.2f} of 7 (scores {' '.join(f'{s:.2f}' for s in scores)})"
        return choice


POLICIES = {
    cls.name: cls
    for cls in (RoundRobin, RandomRouter, PowerOfTwo, ConsistentHash, CacheAware, LeastOutstanding, PrefixScore)
}


def make_router(name: str, num_replicas: int, block_size: int, seed: int = 0) -> Router:
    if name not in POLICIES:
        raise ValueError(f"--router {name!r}: no such router (choose one of {', '.join(ROUTERS)})")
    return POLICIES[name](num_replicas, block_size, seed)


def _loads(loads: list[int]) -> str:
    """Loads as `3/4/2/5`."""
    return "/".join(map(str, loads))


def _hash64(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")
