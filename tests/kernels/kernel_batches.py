"""Random paged-attention batches for the kernel tests, with every unused cache slot poisoned."""

from dataclasses import dataclass

import torch


@dataclass(slots=True)
class PagedBatch:
    """One attention step's inputs; unused cache slots hold `poison`."""

    query: torch.Tensor  # [num_tokens, num_heads, head_size]
    key_cache: torch.Tensor  # [num_blocks, block_size, num_kv_heads, head_size]
    value_cache: torch.Tensor  # [num_blocks, block_size, num_kv_heads, head_size]
    query_start_loc: torch.Tensor  # [num_reqs + 1]
    seq_lens: torch.Tensor  # [num_reqs]
    block_table: torch.Tensor  # [num_reqs, max_blocks]; entries past a request's blocks are -1
    scale: float  # softmax scale

    def args(self, key_cache: torch.Tensor | None = None, value_cache: torch.Tensor | None = None) -> tuple:
        """Positional arguments of the attention functions, optionally with other caches."""
        return (
            self.query,
            self.key_cache if key_cache is None else key_cache,
            self.value_cache if value_cache is None else value_cache,
            self.query_start_loc,
            self.seq_lens,
            self.block_table,
            self.scale,
        )

    def clean_caches(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Copies of the caches with the poison replaced by zeros (what the reference needs)."""
        return self.key_cache.nan_to_num(0.0), self.value_cache.nan_to_num(0.0)


def make_paged_batch(
    q_lens: list[int],
    seq_lens: list[int],
    *,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    head_size: int = 16,
    block_size: int = 16,
    dtype: torch.dtype = torch.float32,
    index_dtype: torch.dtype = torch.int32,
    spare_blocks: int = 3,
    poison: float = float("nan"),
    seed: int = 0,
) -> PagedBatch:
    """Requests with these query and context lengths, their blocks at shuffled physical ids.

    Positions `0 .. seq_len-1` of each request hold random K/V; every other slot (block tails,
    spare blocks) holds `poison`, so a kernel that reads past a sequence fails.
    """
    gen = torch.Generator().manual_seed(seed)
    blocks_per_req = [-(-s // block_size) for s in seq_lens]
    num_blocks = sum(blocks_per_req) + spare_blocks
    physical = torch.randperm(num_blocks, generator=gen)  # [num_blocks] shuffled ids
    cache_shape = (num_blocks, block_size, num_kv_heads, head_size)
    key_cache = torch.full(cache_shape, poison, dtype=dtype)  # [num_blocks, block_size, num_kv_heads, head_size]
    value_cache = torch.full(cache_shape, poison, dtype=dtype)  # [num_blocks, block_size, num_kv_heads, head_size]
    block_table = torch.full((len(seq_lens), max(blocks_per_req)), -1, dtype=index_dtype)  # [num_reqs, max_blocks]
    start = 0
    for r, (n, s) in enumerate(zip(blocks_per_req, seq_lens)):
        ids = physical[start : start + n]  # [n]
        start += n
        block_table[r, :n] = ids.to(index_dtype)
        pos = torch.arange(s)  # [s]
        slots = ids[pos // block_size], pos % block_size
        key_cache[slots] = torch.randn(s, num_kv_heads, head_size, generator=gen).to(dtype)
        value_cache[slots] = torch.randn(s, num_kv_heads, head_size, generator=gen).to(dtype)
    query = torch.randn(sum(q_lens), num_heads, head_size, generator=gen).to(dtype)  # [num_tokens, num_heads, head]
    query_start_loc = torch.tensor([0] + q_lens).cumsum(0).to(index_dtype)  # [num_reqs + 1]
    return PagedBatch(
        query=query,
        key_cache=key_cache,
        value_cache=value_cache,
        query_start_loc=query_start_loc,
        seq_lens=torch.tensor(seq_lens, dtype=index_dtype),
        block_table=block_table,
        scale=head_size**-0.5,
    )


def max_rel_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """max |actual - expected| / max |expected|, in fp32; NaN anywhere makes it NaN (so no bound holds)."""
    diff = (actual.float() - expected.float()).abs().max()  # torch.max propagates NaN
    return float(diff / expected.float().abs().max())
