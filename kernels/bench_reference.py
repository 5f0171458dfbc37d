"""Time the torch reference attention on CPU: `python -m kernels.bench_reference`.

Shapes of the CPU engine's real work on opt-125m: 12 heads of 64, blocks of 16; decode batches
of 1/16/64 requests at a context of ~300 tokens, one 512-token prefill, and a mixed step.
"""

import argparse
import time

import torch

from kernels.reference import paged_attention_ref

NUM_HEADS = 12
HEAD_SIZE = 64
BLOCK_SIZE = 16


def make_batch(q_lens: list[int], seq_lens: list[int], dtype: torch.dtype) -> tuple:
    """Random query, caches and metadata for requests with these query and context lengths."""
    blocks_per_req = [(s + BLOCK_SIZE - 1) // BLOCK_SIZE for s in seq_lens]
    num_blocks = sum(blocks_per_req)
    max_blocks = max(blocks_per_req)
    query = torch.randn(sum(q_lens), NUM_HEADS, HEAD_SIZE, dtype=dtype)  # [num_tokens, num_heads, head_size]
    key_cache = torch.randn(num_blocks, BLOCK_SIZE, NUM_HEADS, HEAD_SIZE, dtype=dtype)  # [num_blocks, block_size, kv_heads, head]
    value_cache = torch.randn_like(key_cache)  # [num_blocks, block_size, num_kv_heads, head_size]
    ids = torch.randperm(num_blocks)  # [num_blocks] shuffled physical ids
    block_table = torch.zeros(len(seq_lens), max_blocks, dtype=torch.int32)  # [num_reqs, max_blocks]
    start = 0
    for r, n in enumerate(blocks_per_req):
        block_table[r, :n] = ids[start : start + n]
        start += n
    query_start_loc = torch.tensor([0] + q_lens, dtype=torch.int32).cumsum(0).to(torch.int32)  # [num_reqs + 1]
    seq_lens_t = torch.tensor(seq_lens, dtype=torch.int32)  # [num_reqs]
    return query, key_cache, value_cache, query_start_loc, seq_lens_t, block_table


def time_ms(args: tuple, iters: int) -> float:
    """Median wall time of one `paged_attention_ref` call, in milliseconds."""
    out = torch.empty_like(args[0])  # [num_tokens, num_heads, head_size]
    scale = HEAD_SIZE**-0.5
    paged_attention_ref(*args, scale, out=out)
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        paged_attention_ref(*args, scale, out=out)
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2] * 1e3


def main() -> None:
    """Print ms per call for each benchmark case."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cases = {
        "decode x1, ctx 300": ([1], [300]),
        "decode x16, ctx ~300": ([1] * 16, [290 + 2 * i for i in range(16)]),
        "decode x64, ctx ~300": ([1] * 64, [270 + i for i in range(64)]),
        "prefill 512": ([512], [512]),
        "mixed 256 + 15 decodes": ([256] + [1] * 15, [256] + [300] * 15),
    }
    print(f"paged_attention_ref, {args.dtype}, {torch.get_num_threads()} threads, "
          f"{NUM_HEADS} heads x {HEAD_SIZE}, block {BLOCK_SIZE}")
    for name, (q_lens, seq_lens) in cases.items():
        ms = time_ms(make_batch(q_lens, seq_lens, dtype), args.iters)
        print(f"  {name:<22} {ms:8.3f} ms")


if __name__ == "__main__":
    main()
