"""Times a decode step's GEMMs, layer by layer as the step runs them, through the C++ linear kernel, oneDNN's
packed GEMM and MKL's dense one (torch's F.linear), at each batch size (rows), and prints each path's milliseconds
and the weight bytes it read per second. The weights are random and shaped as a model's (default opt-125m's: qkv,
out_proj, fc1, fc2 per layer, then the lm_head), so from memory when they exceed the largest cache. The paths run
in turns, the fastest pass of each kept.

    python tools/bench_cpu_linear.py                       # opt-125m's shapes, float32, 1 2 3 4 6 8 rows
    python tools/bench_cpu_linear.py --dtype bfloat16 --rows 1 8
"""

import argparse
import time

import torch
import torch.nn.functional as F

from enginetui.core.worker.cpu_linear import PACK_FOR_ROWS
from enginetui.kernels import cpu_kernels


def model_weights(layers: int, hidden: int, ffn: int, vocab: int, dtype: torch.dtype) -> list[torch.Tensor]:
    """A step's GEMM weights `[out, in]` in the order it runs them."""
    shapes = [(3 * hidden, hidden), (hidden, hidden), (ffn, hidden), (hidden, ffn)] * layers + [(vocab, hidden)]
    return [torch.randn(*shape).mul_(0.02).to(dtype) for shape in shapes]


def time_paths(weights: list[torch.Tensor], rows: int, repeats: int) -> dict[str, float]:
    """Seconds of the fastest pass over every weight, per path (kernel, oneDNN, MKL), passes in turns."""
    packed = [torch.ops.mkldnn._reorder_linear_weight(w, PACK_FOR_ROWS) for w in weights]
    inputs = {k: torch.randn(rows, k).to(weights[0].dtype) for k in {w.shape[1] for w in weights}}
    paths = {
        "kernel": lambda i, w: cpu_kernels.skinny_linear_cpu(inputs[w.shape[1]], w, None),
        "oneDNN": lambda i, w: torch.ops.mkldnn._linear_pointwise(inputs[w.shape[1]], packed[i], None, "none", [], ""),
        "MKL": lambda i, w: F.linear(inputs[w.shape[1]], w),
    }
    best = dict.fromkeys(paths, float("inf"))
    for _ in range(repeats + 1):  # the first pass warms up, and is kept only if it is the fastest
        for name, run in paths.items():
            start = time.perf_counter()
            for i, w in enumerate(weights):
                run(i, w)
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 2, 3, 4, 6, 8], help="batch sizes, 1 to 8")
    parser.add_argument("--repeats", type=int, default=5, help="timed passes of each path (default 5)")
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--ffn", type=int, default=3072)
    parser.add_argument("--vocab", type=int, default=50272)
    args = parser.parse_args()
    if not cpu_kernels.available():
        print(f"the C++ kernels are unavailable: {cpu_kernels.unavailable_reason()}")
        return 1
    if any(not 1 <= rows <= 8 for rows in args.rows):
        print("--rows: batch sizes from 1 to 8")
        return 1
    weights = model_weights(args.layers, args.hidden, args.ffn, args.vocab, getattr(torch, args.dtype))
    total = sum(w.nbytes for w in weights)
    print(f"{len(weights)} GEMMs, {total / 1e6:.1f} MB of {args.dtype} weights, {torch.get_num_threads()} threads")
    print(f"{'rows':>4}" + "".join(f"  {name + ' ms':>9}  {'GB/s':>5}" for name in ("kernel", "oneDNN", "MKL")))
    for rows in args.rows:
        best = time_paths(weights, rows, args.repeats)
        print(f"{rows:>4}" + "".join(f"  {s * 1e3:>9.2f}  {total / s / 1e9:>5.1f}" for s in best.values()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
