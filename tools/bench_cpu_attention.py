"""Time the CPU attention backends: `python tools/bench_cpu_attention.py`.

Shapes of the CPU engine's real work on opt-125m: 12 heads of 64, blocks of 16; decode batches
of 1/16/64 requests (at a context of ~300 tokens, and at the mixed workload's spread of 33-767),
of 2 and 8 requests at 1,536 tokens (ShareGPT's long replies), one 512-token and one 1,536-token
prefill, and a mixed step. Each backend (`torch`: the reference, `cpp`: the C++
kernels) runs the same batch; the ratio is torch / cpp. Wall time by default; `--cpu-time`
measures the calling thread's CPU time instead (one thread), which a busy machine disturbs less.
`--cold` gives every case the caches of 12 layers, called in turn as a model step calls them, so
each call reads its keys and values from memory rather than from a warm cache; it prints the rate
the context's K/V bytes were read at, beside the machine's memory read rate. `--prompts` times instead a prompt
computed from its first token, 32 to 2,048 tokens, in opt-125m's heads and Llama-3's (32 of 128 over 8 kv heads):
the C++ kernel against `kernels.prompt_attention` (torch's SDPA, which a bf16 engine on an AMX CPU takes).
"""

import argparse
import time

import numpy as np
import torch

from enginetui.core.ceil_div import cdiv
from enginetui.kernels import prompt_attention
from enginetui.kernels.cpu_kernels import paged_attention_cpu
from enginetui.kernels.paged_batch import context_kv_bytes, make_paged_batch, time_ms
from enginetui.kernels.reference import paged_attention_ref

BACKENDS = {"torch": paged_attention_ref, "cpp": paged_attention_cpu}

COLD_LAYERS = 12  # --cold: caches per case, one per opt-125m layer
# name: (q_lens, seq_lens)
CASES = {
    "decode x1, ctx 300": ([1], [300]),
    "decode x16, ctx ~300": ([1] * 16, [290 + 2 * i for i in range(16)]),
    "decode x64, ctx ~300": ([1] * 64, [270 + i for i in range(64)]),
    "decode x64, ctx 33-767": ([1] * 64, np.random.default_rng(0).integers(33, 768, 64).tolist()),
    "decode x2, ctx 1536": ([1] * 2, [1536] * 2),
    "decode x8, ctx 1536": ([1] * 8, [1536] * 8),
    "prefill 512": ([512], [512]),
    "prefill 1536": ([1536], [1536]),
    "mixed 256 + 15 decodes": ([256] + [1] * 15, [256] + [300] * 15),
}
PROMPT_LENS = (32, 64, 128, 256, 512, 1024, 2048)  # --prompts
PROMPT_HEADS = {"opt-125m": (12, 12, 64), "llama-3": (32, 8, 128)}  # (heads, kv heads, head size)


def time_prompts(dtype: torch.dtype, iters: int, clock) -> None:
    """Print ms per call of a whole prompt of each length through the C++ kernel and through SDPA."""
    print(f"  {'heads':<9} {'tokens':>6} {'cpp':>9} {'sdpa':>9}  cpp/sdpa")
    for name, (heads, kv_heads, head_size) in PROMPT_HEADS.items():
        for n in PROMPT_LENS:
            batch = make_paged_batch(
                [n], [n], num_heads=heads, num_kv_heads=kv_heads, head_size=head_size, block_size=16, dtype=dtype
            )
            blocks = batch.block_table[0, : cdiv(n, 16)].long()
            key, value = (cache[blocks].flatten(0, 1)[:n] for cache in (batch.key_cache, batch.value_cache))

            def sdpa(query, *cache_args, out, key=key, value=value):  # the step has them at hand
                prompt_attention(query, key, value, cache_args[-1], out)

            cpp, sdpa_ms = (time_ms(fn, [batch], iters, clock) for fn in (paged_attention_cpu, sdpa))
            print(f"  {name:<9} {n:6d} {cpp:9.3f} {sdpa_ms:9.3f}  {cpp / sdpa_ms:7.2f}x")


def memory_read_gb_s() -> float:
    """The machine's memory read rate: the best of five sums over 1 GiB, in GB/s."""
    data = torch.ones(1 << 28)  # [2^28] fp32 = 1 GiB
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        data.sum()
        best = min(best, time.perf_counter() - t0)
    return data.numel() * data.element_size() / best / 1e9


def main() -> None:
    """Print ms per call for each case and backend."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--cpu-time", action="store_true", help="this thread's CPU time (implies --threads 1)")
    parser.add_argument(
        "--cold",
        action="store_true",
        help=f"{COLD_LAYERS} layers' caches per case, called in turn (K/V read from memory)",
    )
    parser.add_argument("--prompts", action="store_true", help="whole prompts: the C++ kernel against torch's SDPA")
    args = parser.parse_args()
    if args.threads or args.cpu_time:
        torch.set_num_threads(1 if args.cpu_time else args.threads)
    clock = time.thread_time if args.cpu_time else time.perf_counter
    layers = COLD_LAYERS if args.cold else 1
    unit = f"{'CPU' if args.cpu_time else 'wall'} ms per call (median of {args.iters})"
    if args.prompts:
        print(f"whole prompts, {args.dtype}, {torch.get_num_threads()} threads, block 16, {unit}")
        time_prompts(getattr(torch, args.dtype), args.iters, clock)
        return
    print(
        f"paged attention, {args.dtype}, {torch.get_num_threads()} threads, 12 heads x 64, block 16, {unit}"
        + (f", {layers} layers' caches in turn" if args.cold else "")
    )
    if args.cold:
        print(f"  memory read rate: {memory_read_gb_s():.1f} GB/s (sum over 1 GiB)")
    print(f"  {'case':<24} {'torch':>9} {'cpp':>9}  torch/cpp" + ("  cpp context K/V GB/s" if args.cold else ""))
    for name, (q_lens, seq_lens) in CASES.items():
        batches = [
            make_paged_batch(
                q_lens,
                seq_lens,
                num_heads=12,
                num_kv_heads=12,
                head_size=64,
                block_size=16,
                dtype=getattr(torch, args.dtype),
                poison=0.0,
                seed=layer,
            )
            for layer in range(layers)
        ]
        ms = {b: time_ms(fn, batches, args.iters, clock) for b, fn in BACKENDS.items()}
        rate = f"  {context_kv_bytes(batches[0]) / ms['cpp'] / 1e6:21.1f}" if args.cold else ""
        print(f"  {name:<24} {ms['torch']:9.3f} {ms['cpp']:9.3f}  {ms['torch'] / ms['cpp']:8.1f}x{rate}")


if __name__ == "__main__":
    main()
