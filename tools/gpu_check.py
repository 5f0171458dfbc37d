"""One command for a CUDA machine: `python tools/gpu_check.py [--json PATH]`.

1. Kernel parity: the Triton kernels against the torch reference on CUDA, several shapes and dtypes.
2. End-to-end greedy parity: `enginetui.core.LLM` against transformers' `OPTForCausalLM.generate` on a
   random-weight opt-125m, prompt by prompt.
3. Benchmarks: decode attention (achieved GB/s against the bytes it must read), prefill attention
   (achieved TFLOP/s), each per launch variant, and the engine's output tokens per second on 64 prompts.

Prints a markdown table, writes it as JSON with --json, and exits nonzero on any parity failure.
`--cpu-smoke` runs the same steps on CPU with tiny shapes and the Triton kernels interpreted
(TRITON_INTERPRET=1, also inside the engine), so the script itself can be exercised anywhere.
"""

import argparse
import json
import os
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field

import torch

from enginetui.kernels.dispatch import BACKEND_ENV
from enginetui.kernels.paged_batch import REL_TOL, PagedBatch, make_paged_batch, max_rel_error
from enginetui.kernels.reference import paged_attention_ref, reshape_and_cache_ref
from enginetui.kernels.variants import DEFAULT, VARIANTS, AttentionVariant

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@dataclass(slots=True)
class Plan:
    """The shapes of one run: the full CUDA check or the CPU smoke run."""

    device: str  # "cuda" or "cpu"
    # name: (q_lens, seq_lens, num_heads, num_kv_heads, head_size, block_size), checked in every dtype
    parity_cases: dict[str, tuple]
    opt: dict  # OPTConfig kwargs of the end-to-end model
    e2e_prompt_lens: list[int]  # one parity prompt per length
    e2e_max_tokens: int  # greedy tokens per parity prompt
    throughput: tuple[int, int, int]  # (num_prompts, prompt_len, max_tokens) of the tok/s run
    num_blocks: int  # the engine's KV pool, in blocks
    # name: (num_reqs, context_len, num_heads, num_kv_heads, head_size), decode steps in bf16, block 16
    bench_cases: dict[str, tuple]
    # name: (num_reqs, prompt_len, num_heads, num_kv_heads, head_size), whole causal prompts in bf16, block 16
    prefill_cases: dict[str, tuple]
    bench_iters: int  # timed calls per benchmark case
    # launch variants of the attention kernel: parity on the last parity case, then timed on
    # every bench case; the first is the default launch
    variants: list[AttentionVariant]
    copy_bytes: int  # size of the device-to-device copy that measures the bandwidth ceiling
    engine_optional: bool  # a core.LLM that cannot be imported is a skip (smoke run), not a failure


def full_plan() -> Plan:
    """The CUDA check: real sizes, under 5 minutes on an H200."""
    from enginetui.kernels.e2e_check import OPT_125M

    gen = torch.Generator().manual_seed(0)
    ctx = torch.randint(1, 2048, (48,), generator=gen).tolist()
    return Plan(
        device="cuda",
        parity_cases={
            "decode x48 ctx<2048, 32/8 heads, h128, b16": ([1] * 48, ctx, 32, 8, 128, 16),
            "prefills 700+333, 12 heads, h64, b16": ([700, 333], [700, 333], 12, 12, 64, 16),
            "mixed chunk 300@1000 + 20 decodes, 32 heads, h128, b32": (
                [300] + [1] * 20,
                [1000] + ctx[:20],
                32,
                32,
                128,
                32,
            ),
            "mixed odd, 6/2 heads, h64, b32": ([1, 13, 1, 77, 2], [29, 13, 640, 170, 5], 6, 2, 64, 32),
            "mixed odd, 8/8 heads, h32, b8": ([1, 13, 1, 77, 2], [29, 13, 640, 170, 5], 8, 8, 32, 8),
        },
        opt=OPT_125M,
        e2e_prompt_lens=[1, 7, 16, 33, 64, 100, 250, 511],
        e2e_max_tokens=32,
        throughput=(64, 128, 128),
        num_blocks=4096,
        bench_cases={
            "decode 64 x ctx 1024, 32 heads, h128": (64, 1024, 32, 32, 128),
            "decode 64 x ctx 4096, 32 heads, h128": (64, 4096, 32, 32, 128),
            "decode 64 x ctx 4096, 32/8 heads (GQA), h128": (64, 4096, 32, 8, 128),
            "decode 64 x ctx 1024, 12 heads, h64 (opt-125m)": (64, 1024, 12, 12, 64),
        },
        prefill_cases={
            "prefill 8 x 2048, 32/8 heads (GQA), h128": (8, 2048, 32, 8, 128),
            "prefill 16 x 512, 12 heads, h64 (opt-125m)": (16, 512, 12, 12, 64),
        },
        bench_iters=20,
        variants=VARIANTS,
        copy_bytes=2 * 1024**3,
        engine_optional=False,
    )


def smoke_plan() -> Plan:
    """The CPU dry run: every step on tiny shapes, the kernels interpreted."""
    from enginetui.kernels.e2e_check import OPT_TINY

    return Plan(
        device="cpu",
        parity_cases={"mixed odd, 4/2 heads, h16, b16": ([1, 5, 1, 18], [20, 5, 33, 40], 4, 2, 16, 16)},
        opt=OPT_TINY,
        e2e_prompt_lens=[1, 5, 12],
        e2e_max_tokens=6,
        throughput=(4, 8, 4),
        num_blocks=64,
        bench_cases={"decode 4 x ctx 64, 4 heads, h16": (4, 64, 4, 4, 16)},
        prefill_cases={"prefill 2 x 40, 4/2 heads, h16": (2, 40, 4, 2, 16)},
        bench_iters=2,
        variants=[DEFAULT, AttentionVariant(tile_n=32, num_warps=8, num_splits=3, block_m=32)],
        copy_bytes=1024**2,
        engine_optional=True,
    )


@dataclass(slots=True)
class Report:
    """Table rows and the overall verdict."""

    device: str  # what ran it
    rows: list[dict] = field(default_factory=list)  # {"section", "case", "ok", "result", "detail", ...}
    ok: bool = True  # False once any parity check failed

    def add(self, section: str, case: str, ok: bool | None, result: str, detail: str = "", **data) -> None:
        """One row; ok=None for measurements, False fails the run."""
        self.rows.append(dict(section=section, case=case, ok=ok, result=result, detail=detail, **data))
        if ok is False:
            self.ok = False
        mark = {True: "ok", False: "FAIL", None: "--"}[ok]
        print(f"[{mark}] {section}: {case}: {result} {detail}", flush=True)

    def markdown(self) -> str:
        """The rows as a markdown table."""
        lines = ["| section | case | ok | result | detail |", "|---|---|---|---|---|"]
        for r in self.rows:
            mark = {True: "ok", False: "**FAIL**", None: ""}[r["ok"]]
            lines.append(f"| {r['section']} | {r['case']} | {mark} | {r['result']} | {r['detail']} |")
        return "\n".join(lines)


def time_ms(fn, iters: int, device: str) -> float:
    """Median milliseconds of `fn()` after one warm-up call: CUDA events on CUDA, wall clock on CPU."""
    fn()
    times = []
    for _ in range(iters):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return sorted(times)[len(times) // 2]


def check_kernel_parity(plan: Plan, report: Report) -> None:
    """Both Triton kernels against the reference, on poisoned caches and NaN-filled outputs; then
    every other launch variant of the attention kernel on the last case."""
    from enginetui.kernels.triton_reshape_and_cache import reshape_and_cache_triton

    for name, case in plan.parity_cases.items():
        _, _, _, kv_heads, _, block_size = case
        for dtype in DTYPES:
            batch = attention_parity(plan, report, name, case, dtype, DEFAULT)

            # reshape_and_cache: this batch's queries as new K/V rows, every third token padding (-1).
            key = batch.query[:, :kv_heads]  # [num_tokens, num_kv_heads, head_size] strided view
            value = -key  # [num_tokens, num_kv_heads, head_size]
            slots = torch.randperm(batch.key_cache.shape[0] * block_size, device=plan.device)[: key.shape[0]]
            slots[::3] = -1  # [num_tokens]
            caches = [torch.full_like(batch.key_cache, float("nan")) for _ in range(4)]
            reshape_and_cache_triton(key, value, caches[0], caches[1], slots)
            reshape_and_cache_ref(key, value, caches[2], caches[3], slots)
            same = all(torch.equal(a.nan_to_num(7.0), b.nan_to_num(7.0)) for a, b in zip(caches[:2], caches[2:]))
            report.add(
                "cache-write parity", f"{name}, {dtype_name(dtype)}", same, "bitwise equal" if same else "differs"
            )

    name, case = list(plan.parity_cases.items())[-1]
    for variant in plan.variants[1:]:
        for dtype in DTYPES:
            attention_parity(plan, report, f"{name}, {variant}", case, dtype, variant)


def attention_parity(
    plan: Plan, report: Report, label: str, case: tuple, dtype: torch.dtype, variant: AttentionVariant
) -> PagedBatch:
    """One row: the attention kernel launched as `variant` against the reference on a fresh
    batch of `case`; returns the batch."""
    from enginetui.kernels.triton_paged_attention import paged_attention_triton

    q_lens, seq_lens, heads, kv_heads, head_size, block_size = case
    batch = make_paged_batch(
        q_lens,
        seq_lens,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_size=head_size,
        block_size=block_size,
        dtype=dtype,
        device=plan.device,
    )
    out = torch.full_like(batch.query, float("nan"))  # [num_tokens, num_heads, head_size]
    paged_attention_triton(*batch.args(), out=out, **variant.kwargs())
    err = max_rel_error(out, paged_attention_ref(*batch.args(*batch.clean_caches())))
    tol = REL_TOL[dtype]
    report.add(
        "attention parity",
        f"{label}, {dtype_name(dtype)}",
        err < tol,
        f"rel err {err:.2e}",
        f"(tol {tol:.0e})",
        rel_err=err,
        tol=tol,
    )
    return batch


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def check_e2e(plan: Plan, report: Report) -> None:
    """Greedy parity with transformers per prompt, then the engine's output tok/s."""
    try:
        import enginetui.core  # noqa: F401  (is the engine importable at all?)
    except ImportError as exc:
        report.add(
            "e2e", "enginetui.core.LLM", None if plan.engine_optional else False, "core is not importable", str(exc)
        )
        return
    from enginetui.kernels.e2e_check import LOGPROB_TOL, NEAR_TIE, run_e2e

    result = run_e2e(plan.opt, plan.device, plan.e2e_prompt_lens, plan.e2e_max_tokens, plan.throughput, plan.num_blocks)
    for p in result.parity:
        detail = f"max logprob diff {p.max_logprob_diff:.1e} (tol {LOGPROB_TOL:.0e})"
        if p.near_tie_gap is None:
            outcome = f"{p.matched}/{plan.e2e_max_tokens} tokens equal"
        else:
            outcome = f"diverged at token {p.matched}"
            detail += f"; transformers' logit gap there {p.near_tie_gap:.1e} (near tie below {NEAR_TIE:.0e})"
        report.add("e2e greedy parity", f"prompt of {p.prompt_len} tokens", p.ok, outcome, detail, **asdict(p))
    report.add(
        "e2e sampling",
        "seeded request alone == inside a batch (top-k/p, min-p, penalties)",
        result.seeded_ok,
        "same tokens" if result.seeded_ok else "differ",
    )
    num_prompts, prompt_len, out_len = plan.throughput
    report.add(
        "e2e throughput",
        f"{num_prompts} prompts x {prompt_len} in, {out_len} out, float32",
        None,
        f"{result.tokens_per_s:.0f} output tok/s",
        f"({result.generated} tokens)",
        tok_s=result.tokens_per_s,
    )


def copy_bandwidth_gb_s(copy_bytes: int, device: str, iters: int) -> float:
    """The memory-bandwidth ceiling: a device-to-device copy of `copy_bytes`, bytes read plus bytes written."""
    src = torch.rand(copy_bytes // 4, device=device)  # [copy_bytes / 4] float32
    dst = torch.empty_like(src)
    ms = time_ms(lambda: dst.copy_(src), iters, device)
    return 2 * copy_bytes / (ms * 1e-3) / 1e9


def bench_decode(plan: Plan, report: Report) -> None:
    """Decode attention in bf16, block 16: time per call and GB/s against the bytes it must read,
    as a share of the measured copy bandwidth."""
    ceiling = copy_bandwidth_gb_s(plan.copy_bytes, plan.device, plan.bench_iters)
    report.add(
        "bandwidth ceiling",
        f"device-to-device copy of {plan.copy_bytes / 1e6:,.0f} MB",
        None,
        f"{ceiling:.0f} GB/s",
        "(read + written)",
        gb_s=ceiling,
    )
    for name, (num_reqs, ctx, heads, kv_heads, head_size) in plan.bench_cases.items():
        batch = make_paged_batch(
            [1] * num_reqs,
            [ctx] * num_reqs,
            num_heads=heads,
            num_kv_heads=kv_heads,
            head_size=head_size,
            block_size=16,
            dtype=torch.bfloat16,
            device=plan.device,
            spare_blocks=0,
            poison=0.0,
        )
        elt = batch.query.element_size()
        kv_bytes = 2 * num_reqs * ctx * kv_heads * head_size * elt  # K and V of every context token
        q_out_bytes = 2 * batch.query.numel() * elt  # query in, output out
        for t in time_variants(plan, batch):
            gb_s = (kv_bytes + q_out_bytes) / (t.ms * 1e-3) / 1e9
            report.add(
                "decode attention bf16",
                f"{name}, {t.variant}",
                None,
                f"{t.ms:.3f} ms, {gb_s:.0f} GB/s",
                f"({gb_s / ceiling:.0%} of copy; {t.runs_text()})",
                **t.data(),
                gb_s=gb_s,
                bytes=kv_bytes + q_out_bytes,
            )


def bench_prefill(plan: Plan, report: Report) -> None:
    """Prefill attention in bf16, block 16, whole causal prompts: time per call and TFLOP/s."""
    for name, (num_reqs, prompt_len, heads, kv_heads, head_size) in plan.prefill_cases.items():
        batch = make_paged_batch(
            [prompt_len] * num_reqs,
            [prompt_len] * num_reqs,
            num_heads=heads,
            num_kv_heads=kv_heads,
            head_size=head_size,
            block_size=16,
            dtype=torch.bfloat16,
            device=plan.device,
            spare_blocks=0,
            poison=0.0,
        )
        pairs = num_reqs * prompt_len * (prompt_len + 1) // 2  # (query, key) pairs a causal prompt scores
        flops = 4 * pairs * heads * head_size  # QK^T and PV, a multiply and an add each
        sdpa_ms = time_sdpa(num_reqs, prompt_len, heads, kv_heads, head_size, plan)
        report.add(
            "prefill attention bf16",
            f"{name}, torch SDPA (dense, not paged)",
            None,
            f"{sdpa_ms:.3f} ms, {flops / (sdpa_ms * 1e-3) / 1e12:.0f} TFLOP/s",
            "(scaled_dot_product_attention, causal, the same shapes: the dense ceiling)",
            sdpa_ms=sdpa_ms,
            flops=flops,
        )
        for t in time_variants(plan, batch):
            tflop_s = flops / (t.ms * 1e-3) / 1e12
            report.add(
                "prefill attention bf16",
                f"{name}, {t.variant}",
                None,
                f"{t.ms:.3f} ms, {tflop_s:.0f} TFLOP/s",
                f"({t.runs_text()})",
                **t.data(),
                tflop_s=tflop_s,
                flops=flops,
            )


def time_sdpa(num_reqs: int, prompt_len: int, heads: int, kv_heads: int, head_size: int, plan: Plan) -> float:
    """ms per call of torch's fused causal attention on dense [num_reqs, heads, prompt_len, head_size] bf16."""
    gen = torch.Generator(device=plan.device).manual_seed(0)

    def rand(h: int) -> torch.Tensor:
        return torch.randn(num_reqs, h, prompt_len, head_size, generator=gen, device=plan.device, dtype=torch.bfloat16)

    q, k, v = rand(heads), rand(kv_heads), rand(kv_heads)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    return time_ms(lambda: sdpa(q, k, v, is_causal=True, enable_gqa=True), plan.bench_iters, plan.device)


@dataclass(frozen=True, slots=True)
class VariantTiming:
    """One launch variant timed on one batch."""

    variant: AttentionVariant  # the launch
    runs: list[float]  # ms per call in each timed run (their spread is the noise)
    ref_ms: float  # ms per call of the torch reference on the same batch

    @property
    def ms(self) -> float:
        """The best run's ms per call."""
        return min(self.runs)

    def runs_text(self) -> str:
        return f"runs {self.runs[0]:.3f} / {self.runs[1]:.3f} ms; torch reference {self.ref_ms:.3f} ms"

    def data(self) -> dict:
        """The row's JSON fields: the launch's arguments and the times."""
        return {**self.variant.kwargs(), "triton_ms": self.ms, "runs_ms": self.runs, "ref_ms": self.ref_ms}


def time_variants(plan: Plan, batch: PagedBatch):
    """A VariantTiming for each launch variant on `batch`, each timed twice."""
    from enginetui.kernels.triton_paged_attention import paged_attention_triton

    out = torch.empty_like(batch.query)  # [num_tokens, num_heads, head_size]
    ref_ms = time_ms(lambda: paged_attention_ref(*batch.args(), out=out), plan.bench_iters, plan.device)
    for variant in plan.variants:

        def call(variant=variant):
            paged_attention_triton(*batch.args(), out=out, **variant.kwargs())

        yield VariantTiming(variant, [time_ms(call, plan.bench_iters, plan.device) for _ in range(2)], ref_ms)


STEPS = {"parity": check_kernel_parity, "e2e": check_e2e, "decode": bench_decode, "prefill": bench_prefill}


def main() -> int:
    """Run every step (or those of --steps); 0 when all parity checks pass."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="also write the table as JSON to this path")
    parser.add_argument("--cpu-smoke", action="store_true", help="tiny shapes on CPU, Triton interpreted")
    parser.add_argument("--steps", nargs="+", choices=list(STEPS), default=list(STEPS), help="run only these steps")
    args = parser.parse_args()
    if args.cpu_smoke:
        # Before anything imports triton: it picks interpreted or compiled at decoration time.
        if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
            raise RuntimeError("triton was imported before TRITON_INTERPRET=1 could be set")
        os.environ["TRITON_INTERPRET"] = "1"
        os.environ[BACKEND_ENV] = "triton"  # the engine, too, runs the Triton kernels
        plan = smoke_plan()
    elif not torch.cuda.is_available():
        print("no CUDA device: run on a CUDA machine, or use --cpu-smoke", file=sys.stderr)
        return 2
    else:
        plan = full_plan()

    device_name = torch.cuda.get_device_name() if plan.device == "cuda" else "cpu (TRITON_INTERPRET=1)"
    report = Report(device=device_name)
    print(f"gpu_check on {device_name}: torch {torch.__version__}", flush=True)
    start = time.perf_counter()
    for step in (STEPS[name] for name in args.steps):
        try:
            step(plan, report)
        except Exception as exc:  # a crash fails the run but the other steps still report
            traceback.print_exc()
            report.add("crash", step.__name__, False, type(exc).__name__, str(exc)[:200])

    print(f"\n{report.markdown()}\n\n{'PASS' if report.ok else 'FAIL'} in {time.perf_counter() - start:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(asdict(report), f, indent=2)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
