"""Time the CPU attention backends: `python -m kernels.bench_cpu_attention`.

Shapes of the CPU engine's real work on opt-125m: 12 heads of 64, blocks of 16; decode batches
of 1/16/64 requests (at a context of ~300 tokens, and at the mixed workload's spread of 33-767),
one 512-token prefill, and a mixed step. Each backend (`torch`: the reference, `cpp`: the C++
kernels) runs the same batch; the ratio is torch / cpp. Wall time by default; `--cpu-time`
measures the calling thread's CPU time instead (one thread), which a busy machine disturbs less.
"""

import argparse
import time

import numpy as np
import torch

from kernels.cpu_kernels import paged_attention_cpu
from kernels.paged_batch import PagedBatch, make_paged_batch
from kernels.reference import paged_attention_ref

BACKENDS = {"torch": paged_attention_ref, "cpp": paged_attention_cpu}

# name: (q_lens, seq_lens)
CASES = {
    "decode x1, ctx 300": ([1], [300]),
    "decode x16, ctx ~300": ([1] * 16, [290 + 2 * i for i in range(16)]),
    "decode x64, ctx ~300": ([1] * 64, [270 + i for i in range(64)]),
    "decode x64, ctx 33-767": ([1] * 64, np.random.default_rng(0).integers(33, 768, 64).tolist()),
    "prefill 512": ([512], [512]),
    "mixed 256 + 15 decodes": ([256] + [1] * 15, [256] + [300] * 15),
}


def time_ms(fn, batch: PagedBatch, iters: int, clock) -> float:
    """Median time of one call, in milliseconds."""
    out = torch.empty_like(batch.query)  # [num_tokens, num_heads, head_size]
    fn(*batch.args(), out=out)
    times = []
    for _ in range(iters):
        t0 = clock()
        fn(*batch.args(), out=out)
        times.append(clock() - t0)
    return sorted(times)[len(times) // 2] * 1e3


def main() -> None:
    """Print ms per call for each case and backend."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--cpu-time", action="store_true", help="this thread's CPU time (implies --threads 1)")
    args = parser.parse_args()
    if args.threads or args.cpu_time:
        torch.set_num_threads(1 if args.cpu_time else args.threads)
    clock = time.thread_time if args.cpu_time else time.perf_counter
    print(f"paged attention, {args.dtype}, {torch.get_num_threads()} threads, 12 heads x 64, block 16, "
          f"{'CPU' if args.cpu_time else 'wall'} ms per call (median of {args.iters})")
    print(f"  {'case':<24} {'torch':>9} {'cpp':>9}  torch/cpp")
    for name, (q_lens, seq_lens) in CASES.items():
        batch = make_paged_batch(
            q_lens, seq_lens, num_heads=12, num_kv_heads=12, head_size=64, block_size=16,
            dtype=getattr(torch, args.dtype), poison=0.0,
        )
        ms = {b: time_ms(fn, batch, args.iters, clock) for b, fn in BACKENDS.items()}
        print(f"  {name:<24} {ms['torch']:9.3f} {ms['cpp']:9.3f}  {ms['torch'] / ms['cpp']:8.1f}x")


if __name__ == "__main__":
    main()
