"""Time the torch reference attention on CPU: `python -m kernels.bench_reference`.

Shapes of the CPU engine's real work on opt-125m: 12 heads of 64, blocks of 16; decode batches
of 1/16/64 requests at a context of ~300 tokens, one 512-token prefill, and a mixed step.
"""

import argparse
import time

import torch

from kernels.paged_batch import PagedBatch, make_paged_batch
from kernels.reference import paged_attention_ref

# name: (q_lens, seq_lens)
CASES = {
    "decode x1, ctx 300": ([1], [300]),
    "decode x16, ctx ~300": ([1] * 16, [290 + 2 * i for i in range(16)]),
    "decode x64, ctx ~300": ([1] * 64, [270 + i for i in range(64)]),
    "prefill 512": ([512], [512]),
    "mixed 256 + 15 decodes": ([256] + [1] * 15, [256] + [300] * 15),
}


def time_ms(batch: PagedBatch, iters: int) -> float:
    """Median wall time of one `paged_attention_ref` call, in milliseconds."""
    out = torch.empty_like(batch.query)  # [num_tokens, num_heads, head_size]
    paged_attention_ref(*batch.args(), out=out)
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        paged_attention_ref(*batch.args(), out=out)
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2] * 1e3


def main() -> None:
    """Print ms per call for each case."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"paged_attention_ref, {args.dtype}, {torch.get_num_threads()} threads, 12 heads x 64, block 16")
    for name, (q_lens, seq_lens) in CASES.items():
        batch = make_paged_batch(
            q_lens, seq_lens, num_heads=12, num_kv_heads=12, head_size=64, block_size=16,
            dtype=getattr(torch, args.dtype), poison=0.0,
        )
        print(f"  {name:<24} {time_ms(batch, args.iters):8.3f} ms")


if __name__ == "__main__":
    main()
