"""Random paged-attention batches, the error measure and bounds kernels are compared with, and their timing.

Shared by the tests, tools/bench_cpu_attention.py and tools/gpu_check.py. Every cache slot a
request does not own (block tails, spare blocks) holds `poison`, so a kernel that reads past a
sequence shows it.
"""

from dataclasses import dataclass

import torch

from enginetui.core.ceil_div import cdiv

# Bound on max|triton - reference| / max|reference| by dtype: fp32 differs by summation order only;
# fp16/bf16 also round the probabilities before P@V, and the output.
REL_TOL = {torch.float32: 2e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}


@dataclass(slots=True)
class PagedBatch:
    """One attention step's inputs; unused cache slots hold the poison value."""

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
        """Copies of the caches with NaN poison replaced by zeros: the reference computes over
        padding slots and masks them afterwards, so it needs finite values there."""
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
    device: str | torch.device = "cpu",
    index_dtype: torch.dtype = torch.int32,
    spare_blocks: int = 3,
    poison: float = float("nan"),
    seed: int = 0,
) -> PagedBatch:
    """Requests with these query and context lengths, their blocks at shuffled physical ids."""
    gen = torch.Generator(device=device).manual_seed(seed)
    blocks_per_req = [cdiv(s, block_size) for s in seq_lens]
    num_blocks = sum(blocks_per_req) + spare_blocks
    physical = torch.randperm(num_blocks, generator=gen, device=device)  # [num_blocks] shuffled ids
    block_table = torch.full((len(seq_lens), max(blocks_per_req)), -1, dtype=torch.long, device=device)
    owned = torch.zeros(num_blocks * block_size, dtype=torch.bool, device=device)  # [num_slots]
    start = 0
    for r, (n, s) in enumerate(zip(blocks_per_req, seq_lens)):
        block_table[r, :n] = physical[start : start + n]
        start += n
        pos = torch.arange(s, device=device)  # [s]
        owned[block_table[r, pos // block_size] * block_size + pos % block_size] = True

    cache_shape = (num_blocks, block_size, num_kv_heads, head_size)
    unowned = ~owned.view(num_blocks, block_size)  # [num_blocks, block_size]
    key_cache = torch.randn(cache_shape, generator=gen, device=device, dtype=dtype)  # [blocks, block_size, kv, head]
    value_cache = torch.randn(cache_shape, generator=gen, device=device, dtype=dtype)  # [blocks, block_size, kv, head]
    key_cache[unowned] = poison
    value_cache[unowned] = poison
    query = torch.randn(sum(q_lens), num_heads, head_size, generator=gen, device=device, dtype=dtype)
    return PagedBatch(
        query=query,  # [num_tokens, num_heads, head_size]
        key_cache=key_cache,
        value_cache=value_cache,
        query_start_loc=torch.tensor([0] + q_lens, device=device).cumsum(0).to(index_dtype),  # [num_reqs + 1]
        seq_lens=torch.tensor(seq_lens, dtype=index_dtype, device=device),  # [num_reqs]
        block_table=block_table.to(index_dtype),  # [num_reqs, max_blocks]
        scale=head_size**-0.5,
    )


def max_rel_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """max |actual - expected| / max |expected|, in fp32; NaN anywhere makes it NaN (so no bound holds)."""
    diff = (actual.float() - expected.float()).abs().max()  # torch.max propagates NaN
    return float(diff / expected.float().abs().max())


def context_kv_bytes(batch: PagedBatch) -> int:
    """Bytes of the keys and values of every request's context (what a decode must read)."""
    _, _, num_kv_heads, head_size = batch.key_cache.shape
    return int(batch.seq_lens.sum()) * num_kv_heads * head_size * 2 * batch.key_cache.element_size()


def time_ms(fn, batches: list[PagedBatch], iters: int, clock) -> float:
    """Median time of one call of the kernel `fn`, in milliseconds; each timed round (after one warm-up round)
    calls fn on every batch in turn."""
    outs = [torch.empty_like(b.query) for b in batches]  # each [num_tokens, num_heads, head_size]
    for batch, out in zip(batches, outs):
        fn(*batch.args(), out=out)
    times = []
    for _ in range(iters):
        t0 = clock()
        for batch, out in zip(batches, outs):
            fn(*batch.args(), out=out)
        times.append((clock() - t0) / len(batches))
    return sorted(times)[len(times) // 2] * 1e3
