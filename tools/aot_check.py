"""Compile the Triton kernels for NVIDIA GPUs on a machine without one: `python tools/aot_check.py`.

Triton compiles to PTX and cubin anywhere (ptxas ships inside the triton wheel); only running
needs a GPU. Each launch is built by the same function the engine launches through (on CPU
tensors, which give the same strides), specialized as the runtime would (arguments equal to 1
become constants, 16-byte alignment is assumed where it holds), compiled for each target, and
read back: registers, spilled bytes, shared memory, the matrix instruction the dots became and the
widest global load. No GPU time is needed to learn whether a kernel compiles, spills, or uses
the tensor cores.

`--full` compiles every dtype, shape, launch variant and target (sm_80, sm_90); the default is
the quick set the test suite runs.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass

import torch

from enginetui.kernels.variants import DEFAULT, PREFILL, VARIANTS, AttentionVariant

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
TARGETS = {"sm_80": 80, "sm_90": 90}  # A100; H100 / H200
# name: (num_heads, num_kv_heads, head_size, block_size)
ATTENTION_SHAPES = {
    "opt-125m 12 heads h64 b16": (12, 12, 64, 16),
    "32 heads h128 b16": (32, 32, 128, 16),
    "GQA 32/8 heads h128 b16": (32, 8, 128, 16),
    "32 heads h128 b32": (32, 32, 128, 32),
    "GQA 16/4 heads h80 b16 (padded to 128)": (16, 4, 80, 16),
}


@dataclass(slots=True)
class Compiled:
    """What one compiled launch looks like."""

    target: str  # "sm_90", ...
    kernel: str  # "paged_attention" or "reshape_and_cache"
    case: str  # shape, dtype and launch variant
    registers: int | None  # per thread (None when cuobjdump is not there)
    spill_bytes: int | None  # stack + local memory per thread: 0 means no spills
    shared_bytes: int | None  # static shared memory per program
    dot: str  # tensor-core instruction of the tl.dot calls: "wgmma", "mma", or "-" (none: FMAs, or no dot)
    widest_load: str  # the widest global load: "v4" (16 bytes of 32-bit words), "v2" or "scalar"
    compile_s: float  # seconds to compile


def specialize(kernel, args: tuple, meta: dict) -> tuple[dict, dict, dict]:
    """(signature, constexprs, attrs) of a launch, as the Triton runtime specializes it."""
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend

    signature, constexprs, attrs = {}, {}, {}
    for i, (param, arg) in enumerate(zip(kernel.params, args)):
        name = kernel.arg_names[i]
        kind, spec = native_specialize_impl(
            BaseBackend, arg, False, not param.do_not_specialize, not param.do_not_specialize_on_alignment
        )
        signature[name] = kind
        if kind == "constexpr":
            constexprs[name] = spec
        elif spec == "D":
            attrs[(i,)] = [["tt.divisibility", 16]]
    for name, value in meta.items():
        if name != "num_warps":
            signature[name] = "constexpr"
            constexprs[name] = value
    return signature, constexprs, attrs


def compile_launch(launch, target: str) -> tuple[object, float]:
    """Compile `launch` (kernels.launch.Launch) for `target`; returns (compiled kernel, seconds)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    signature, constexprs, attrs = specialize(launch.kernel, launch.args, launch.meta)
    source = ASTSource(fn=launch.kernel, signature=signature, constexprs=constexprs, attrs=attrs)
    start = time.perf_counter()
    compiled = triton.compile(
        source, target=GPUTarget("cuda", TARGETS[target], 32), options={"num_warps": launch.meta.get("num_warps", 4)}
    )
    return compiled, time.perf_counter() - start


def resource_usage(cubin: bytes) -> tuple[int | None, int | None, int | None]:
    """(registers, spill bytes, shared bytes) from `cuobjdump -res-usage`, or Nones without it."""
    import triton

    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    if not os.path.exists(tool):
        return None, None, None
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        report = subprocess.run([tool, "-res-usage", f.name], capture_output=True, text=True, check=True).stdout
    fields = dict(re.findall(r"(REG|STACK|SHARED|LOCAL):(\d+)", report))
    return int(fields["REG"]), int(fields["STACK"]) + int(fields["LOCAL"]), int(fields["SHARED"])


def describe(target: str, kernel: str, case: str, compiled, seconds: float) -> Compiled:
    ptx = compiled.asm["ptx"]
    dot = "wgmma" if "wgmma.mma_async" in ptx else "mma" if "mma.sync" in ptx else "-"
    widest = "v4" if "ld.global.v4" in ptx else "v2" if "ld.global.v2" in ptx else "scalar"
    registers, spills, shared = resource_usage(compiled.asm["cubin"])
    return Compiled(target, kernel, case, registers, spills, shared, dot, widest, seconds)


def attention_launches(full: bool):
    """(case name, Launch) for every attention configuration of the run."""
    from enginetui.kernels.paged_batch import make_paged_batch
    from enginetui.kernels.triton_paged_attention import paged_attention_launch

    shapes = ATTENTION_SHAPES if full else dict(list(ATTENTION_SHAPES.items())[:3])
    variants = VARIANTS if full else [DEFAULT, AttentionVariant(num_splits=4), PREFILL]
    for shape, (heads, kv_heads, head_size, block_size) in shapes.items():
        for dtype_name, dtype in DTYPES.items():
            batch = make_paged_batch(
                [1, 5],
                [20, 40],
                num_heads=heads,
                num_kv_heads=kv_heads,
                head_size=head_size,
                block_size=block_size,
                dtype=dtype,
            )
            for variant in variants:
                if variant == PREFILL and dtype == torch.float32 and not full:
                    continue  # the engine launches it in fp16 / bf16 only (kernels.variants.launch_for_step)
                launch, _ = paged_attention_launch(*batch.args(), torch.empty_like(batch.query), **variant.kwargs())
                yield f"{shape}, {dtype_name}, {variant}", launch


def cache_write_launches():
    """(case name, Launch) for reshape_and_cache in each dtype, at two head shapes."""
    from enginetui.kernels.triton_reshape_and_cache import reshape_and_cache_launch

    for kv_heads, head_size in ((12, 64), (8, 128)):
        for dtype_name, dtype in DTYPES.items():
            key = torch.randn(4, kv_heads, head_size, dtype=dtype)  # [num_tokens, num_kv_heads, head_size]
            cache = torch.empty(8, 16, kv_heads, head_size, dtype=dtype)  # [blocks, block_size, heads, dim]
            slots = torch.arange(4)  # [num_tokens]
            yield (
                f"{kv_heads} kv heads h{head_size}, {dtype_name}",
                reshape_and_cache_launch(key, key, cache, cache.clone(), slots),
            )


def run(full: bool) -> list[Compiled]:
    targets = list(TARGETS) if full else ["sm_90"]
    rows = []
    for target in targets:
        for kernel, launches in (
            ("paged_attention", attention_launches(full)),
            ("reshape_and_cache", cache_write_launches()),
        ):
            for case, launch in launches:
                compiled, seconds = compile_launch(launch, target)
                rows.append(describe(target, kernel, case, compiled, seconds))
                print(_line(rows[-1]), flush=True)
    return rows


def _line(r: Compiled) -> str:
    return (
        f"| {r.target} | {r.kernel} | {r.case} | {r.registers} | {r.spill_bytes} | {r.shared_bytes} | {r.dot} "
        f"| {r.widest_load} | {r.compile_s:.1f} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true", help="every shape, variant and target (a few minutes)")
    parser.add_argument("--json", help="also write the rows as JSON to this path")
    args = parser.parse_args()
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        print("aot_check compiles kernels: unset TRITON_INTERPRET", file=sys.stderr)
        return 2
    print("| target | kernel | case | registers | spilled bytes | shared bytes | dot | widest load | compile s |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = run(args.full)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([asdict(r) for r in rows], f, indent=2)
    spilled = [r for r in rows if r.spill_bytes]
    print(f"\n{len(rows)} launches compiled; {len(spilled)} of them spill registers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
