"""Times a decode step's GEMMs, layer by layer as the step runs them, through the C++ linear kernel, oneDNN's
packed GEMM and MKL's dense one (torch's F.linear), at each batch size (rows), and prints each path's milliseconds
and the weight bytes it read per second. The weights are random and shaped as a model's (default opt-125m's: qkv,
out_proj, fc1, fc2 per layer, then the lm_head), so from memory when they exceed the largest cache. The paths run
in turns, the fastest pass of each kept; the kernel at 1-8 rows only.

A step runs other work between its GEMMs (attention, norms, Python). `--between-us` waits that long before each GEMM
and `--between-mib` reads a buffer that large, untimed (only the GEMMs are): a GEMM whose weight a cache still held
from the pass before loses it, as inside a step.

    python tools/bench_cpu_linear.py                       # opt-125m's shapes, float32, 1 2 3 4 6 8 rows
    python tools/bench_cpu_linear.py --dtype bfloat16 --rows 1 8
    python tools/bench_cpu_linear.py --dtype bfloat16 --rows 32 --between-mib 4
"""

import argparse
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from enginetui.core.worker.cpu_linear import PACK_FOR_ROWS
from enginetui.kernels import cpu_kernels

KERNEL_ROWS = 8  # the C++ kernel's largest batch


def model_weights(layers: int, hidden: int, ffn: int, vocab: int, dtype: torch.dtype) -> list[torch.Tensor]:
    """A step's GEMM weights `[out, in]` in the order it runs them."""
    shapes = [(3 * hidden, hidden), (hidden, hidden), (ffn, hidden), (hidden, ffn)] * layers + [(vocab, hidden)]
    return [torch.randn(*shape).mul_(0.02).to(dtype) for shape in shapes]


def time_paths(
    weights: list[torch.Tensor], rows: int, repeats: int, between: Callable[[], object] | None = None
) -> dict[str, float]:
    """Seconds of the fastest pass over every weight, per path (kernel at 1-8 rows, oneDNN, MKL), passes in turns;
    `between` runs before each GEMM, untimed."""
    packed = [torch.ops.mkldnn._reorder_linear_weight(w, PACK_FOR_ROWS) for w in weights]
    inputs = {k: torch.randn(rows, k).to(weights[0].dtype) for k in {w.shape[1] for w in weights}}
    paths = {
        "kernel": lambda i, w: cpu_kernels.skinny_linear_cpu(inputs[w.shape[1]], w, None),
        "oneDNN": lambda i, w: torch.ops.mkldnn._linear_pointwise(inputs[w.shape[1]], packed[i], None, "none", [], ""),
        "MKL": lambda i, w: F.linear(inputs[w.shape[1]], w),
    }
    if rows > KERNEL_ROWS:
        del paths["kernel"]
    best = dict.fromkeys(paths, float("inf"))
    for _ in range(repeats + 1):  # the first pass warms up, and is kept only if it is the fastest
        for name, run in paths.items():
            took = 0.0
            if between is None:
                start = time.perf_counter()
                for i, w in enumerate(weights):
                    run(i, w)
                took = time.perf_counter() - start
            else:
                for i, w in enumerate(weights):
                    between()
                    start = time.perf_counter()
                    run(i, w)
                    took += time.perf_counter() - start
            best[name] = min(best[name], took)
    return best


def between_gemms(us: float, mib: float) -> Callable[[], None] | None:
    """What runs before each GEMM: a read of `mib` MiB, then `us` microseconds of waiting (None: nothing)."""
    if not us and not mib:
        return None
    buffer = torch.ones(int(mib * (1 << 20)) // 4) if mib else None

    def between() -> None:
        if buffer is not None:
            buffer.sum()
        until = time.perf_counter() + us * 1e-6
        while time.perf_counter() < until:
            pass

    return between


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 2, 3, 4, 6, 8], help="batch sizes (the kernel: 1-8)")
    parser.add_argument("--repeats", type=int, default=5, help="timed passes of each path (default 5)")
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--ffn", type=int, default=3072)
    parser.add_argument("--vocab", type=int, default=50272)
    parser.add_argument("--between-us", type=float, default=0.0, help="wait this long before each GEMM, untimed")
    parser.add_argument("--between-mib", type=float, default=0.0, help="read this many MiB before each GEMM, untimed")
    args = parser.parse_args()
    if not cpu_kernels.available():
        print(f"the C++ kernels are unavailable: {cpu_kernels.unavailable_reason()}")
        return 1
    if any(rows < 1 for rows in args.rows):
        print("--rows: batch sizes of 1 or more")
        return 1
    if args.between_us < 0 or args.between_mib < 0:
        print("--between-us, --between-mib: 0 or more")
        return 1
    weights = model_weights(args.layers, args.hidden, args.ffn, args.vocab, getattr(torch, args.dtype))
    total = sum(w.nbytes for w in weights)
    print(f"{len(weights)} GEMMs, {total / 1e6:.1f} MB of {args.dtype} weights, {torch.get_num_threads()} threads")
    between = between_gemms(args.between_us, args.between_mib)
    print(f"{'rows':>4}" + "".join(f"  {name + ' ms':>9}  {'GB/s':>5}" for name in ("kernel", "oneDNN", "MKL")))
    for rows in args.rows:
        best = time_paths(weights, rows, args.repeats, between)
        cells = [best.get(name) for name in ("kernel", "oneDNN", "MKL")]
        print(
            f"{rows:>4}"
            + "".join(
                f"  {'-':>9}  {'-':>5}" if s is None else f"  {s * 1e3:>9.2f}  {total / s / 1e9:>5.1f}" for s in cells
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
