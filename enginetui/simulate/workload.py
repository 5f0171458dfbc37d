"""What a simulation serves: requests with their prompt and output lengths and when they arrive.

Prompts are lengths unless their tokens matter: with prefix caching off the scheduler never looks
at token values, so the simulator gives a request its stand-in prompt only when it arrives (see
simulator.py); shared-prefix workloads and recordings carry real token ids.
"""

from dataclasses import dataclass

import numpy as np


@dataclass(slots=True)
class SimRequest:
    """One request of a workload."""

    request_id: str  # unique id
    arrival: float  # seconds (on the simulated clock) when it enters the engine
    prompt_len: int  # prompt tokens
    output_len: int  # tokens it generates (forced: max_tokens = output_len, EOS ignored)
    prefix: list[int] | None = None  # token ids its prompt starts with (shared-prefix workloads), None: none
    prompt_token_ids: list[int] | None = None  # the whole prompt (recordings); None: stand-ins (after `prefix`)
    output_token_ids: list[int] | None = None  # the tokens it generates (recordings); None: stand-ins
    priority: int = 0  # scheduling priority (lower first under the priority policy)
    arrival_time: float | None = None  # the request's own time for priority ties (recordings); None: `arrival`
    max_tokens: int | None = None  # the limit the scheduler sees; None: output_len
    hash_ids: tuple[int, ...] | None = (
        None  # traces: the prompt's HASH_BLOCK_TOKENS-token blocks (equal ids: equal tokens)
    )


HASH_BLOCK_TOKENS = 512  # tokens per hash id (Mooncake's blocks)
# Stand-in prompt tokens are drawn from [2, 4096): 0 and 1 are the simulator's fillers, and every model served
# here (the embedded one's 4096-token vocabulary the smallest) takes them, so `bench serve` sends them as they are.
TOKEN_RANGE = (2, 4096)


def prompt_token_ids(r: SimRequest) -> list[int]:
    """The request's prompt as a server (and prefix caching) sees it: its recorded prompt, else its trace blocks
    or shared prefix, then tokens no other prompt shares."""
    if r.prompt_token_ids is not None:
        return list(r.prompt_token_ids)
    return prompt_token_array(r).tolist()


def prompt_token_array(r: SimRequest) -> np.ndarray:
    """prompt_token_ids as an int64 array ([prompt_len]), made without a Python list where it can be."""
    if r.prompt_token_ids is not None:
        return np.asarray(r.prompt_token_ids, dtype=np.int64)
    if r.hash_ids:
        prefix = _token_values(_hash_block_keys(r.hash_ids, r.prompt_len))
    else:
        prefix = np.asarray(r.prefix or [], dtype=np.int64)
    rest = _token_values(_distinct_keys(r.request_id, r.prompt_len - len(prefix)))
    return np.concatenate((prefix, rest)) if len(prefix) else rest


def hash_block_tokens(hash_ids: tuple[int, ...], length: int) -> list[int]:
    """The first `length` tokens of the blocks `hash_ids`: block h always holds the same tokens (a 64-bit
    mix of h and the position, so different blocks share no run of tokens)."""
    return _token_values(_hash_block_keys(hash_ids, length)).tolist()


def _hash_block_keys(hash_ids: tuple[int, ...], length: int) -> np.ndarray:
    positions = np.arange(HASH_BLOCK_TOKENS, dtype=np.uint64)  # [block]
    ids = np.asarray(hash_ids, dtype=np.uint64)[:, None] * np.uint64(HASH_BLOCK_TOKENS) + positions  # [blocks, block]
    return ids.reshape(-1)[:length]


def distinct_tokens(request_id: str, n: int) -> list[int]:
    """`n` tokens no other request's prompt shares (prefix caching finds no false hits): seeded by the id."""
    return _token_values(_distinct_keys(request_id, n)).tolist()


def _distinct_keys(request_id: str, n: int) -> np.ndarray:
    import hashlib

    seed = int.from_bytes(hashlib.blake2b(request_id.encode(), digest_size=8).digest(), "little")
    with np.errstate(over="ignore"):
        return np.uint64(seed) * np.uint64(0x100000001B3) + np.arange(max(n, 0), dtype=np.uint64)  # [n]


def _token_values(keys: np.ndarray) -> np.ndarray:
    """Token ids in TOKEN_RANGE (int64) from uint64 keys, through splitmix64's finaliser (wraps by design)."""
    with np.errstate(over="ignore"):
        x = keys + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    low, high = TOKEN_RANGE
    span = np.uint64(high - low)
    # x % span, through numpy's faster floor division by a scalar
    return (x - x // span * span + np.uint64(low)).astype(np.int64)


def length_range(mean: int, range_ratio: float) -> tuple[int, int]:
    """The lengths [mean * (1 - r), mean * (1 + r)], at least 1, inclusive (vLLM's random dataset)."""
    if mean < 1:
        raise ValueError(f"lengths must be at least 1, got {mean}")
    if not 0 <= range_ratio < 1:
        raise ValueError(f"range ratio must be in [0, 1), got {range_ratio}")
    return max(1, round(mean * (1 - range_ratio))), max(1, round(mean * (1 + range_ratio)))


def random_lengths(num: int, mean: int, range_ratio: float, rng: np.random.Generator) -> np.ndarray:
    """`num` lengths drawn uniformly from length_range(mean, range_ratio)."""
    low, high = length_range(mean, range_ratio)
    return rng.integers(low, high + 1, size=num)  # [num]


def drawn_requests(
    num: int, input_lens: tuple[int, int], output_lens: tuple[int, int], rng: np.random.Generator, name: str
) -> list[SimRequest]:
    """`num` requests `name-i` arriving at 0, prompt and output lengths drawn uniformly from the inclusive ranges
    (the prompts first): `enginetui simulate`'s and `enginetui bench`'s random workloads."""
    inputs = rng.integers(input_lens[0], input_lens[1] + 1, size=num)  # [num]
    outputs = rng.integers(output_lens[0], output_lens[1] + 1, size=num)  # [num]
    return [SimRequest(f"{name}-{i}", 0.0, int(n), int(m)) for i, (n, m) in enumerate(zip(inputs, outputs))]


def random_workload(
    num_prompts: int, input_len: int, output_len: int, range_ratio: float, seed: int
) -> list[SimRequest]:
    """Independent prompts of random lengths (arrivals set later)."""
    ranges = length_range(input_len, range_ratio), length_range(output_len, range_ratio)
    return drawn_requests(num_prompts, *ranges, np.random.default_rng(seed), "sim")


def shared_prefix_workload(
    num_prompts: int,
    num_prefixes: int,
    prefix_len: int,
    input_len: int,
    output_len: int,
    range_ratio: float,
    seed: int,
    vocab_size: int,
) -> list[SimRequest]:
    """Prompts that start with one of `num_prefixes` shared prefixes (request i gets prefix i mod n),
    then a distinct part of random length: what prefix caching saves."""
    if num_prefixes < 1 or prefix_len < 1:
        raise ValueError(
            f"shared-prefix workloads need --num-prefixes >= 1 and --prefix-len >= 1, got "
            f"{num_prefixes} and {prefix_len}"
        )
    rng = np.random.default_rng(seed)
    prefixes = [rng.integers(0, vocab_size, size=prefix_len).tolist() for _ in range(num_prefixes)]
    inputs = random_lengths(num_prompts, input_len, range_ratio, rng)
    outputs = random_lengths(num_prompts, output_len, range_ratio, rng)
    return [
        SimRequest(f"sim-{i}", 0.0, prefix_len + int(n), int(m), prefix=prefixes[i % num_prefixes])
        for i, (n, m) in enumerate(zip(inputs, outputs))
    ]
