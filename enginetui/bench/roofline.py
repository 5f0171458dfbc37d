"""`enginetui bench roofline`: how close each step kind comes to this machine's limits, in the same run.

First the limits, on the threads the engine computes with (core/worker/cpu_threads.py): memory
bandwidth, a STREAM-style triad (`a = b + s * c`) in torch on arrays far larger than the largest
cache, and the GEMM peak in the step's dtype, a large GEMM through the engine's own linear path
(core/worker/cpu_linear.py: oneDNN's packed GEMM where it is the backend, AMX for bf16 where the CPU
has it); the best of --limit-repeats runs of each. Then each step kind, measured as `bench ops`
measures it (ops.py: the same engines, passes in turns, the same breakdown by kind of work): decode
steps of N running requests at each context, and prompt chunks alone. For each, the bytes a step must
move (every GEMM weight once, the KV its attention reads and the KV it writes) and the FLOPs it must
compute (2 x weights x rows, and attention), the floor they set, max(bytes / bandwidth, FLOPs /
GEMM peak), and the fraction of it a measured step reaches: floor / measured time.
"""

import argparse
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import torch
from torch import nn

from enginetui.bench import report
from enginetui.bench.decode_batch import check_decode_capacity
from enginetui.bench.engines import allocate_as_the_engine_child
from enginetui.bench.ops import OpsRow, check_budget, measure_shape, start_ours, start_vllm, steps_per_pass
from enginetui.bench.saved_result import machine
from enginetui.core.models.contract import CausalLM
from enginetui.core.models.layers.linear import Linear
from enginetui.core.worker.cpu_linear import largest_cache_bytes, linear_backend, packable, prepack_linear_weights
from enginetui.core.worker.cpu_threads import engine_threads

TRIAD_CACHE_FACTOR = 4  # each triad array is at least this many times the largest cache
MIN_ARRAY_MIB = 64  # and at least this large


@dataclass(frozen=True, slots=True)
class ModelShape:
    """What a step's bytes and FLOPs depend on."""

    layer_weights: int  # elements of every linear weight in the layers (each token's rows go through all)
    lm_head_weights: int  # elements of the lm_head (the embedding when tied): only rows that need logits
    attention: tuple[tuple[int, int, int | None], ...]  # per attention layer: query heads, head size, window
    dtype_bytes: int  # bytes of one weight element
    kv_bytes_per_token: int  # K and V of one token, every layer


@dataclass(frozen=True, slots=True)
class StepCost:
    """What one step must move and compute (activations, norms and biases left out)."""

    weight_bytes: int  # every GEMM weight read once
    kv_read_bytes: int  # the keys and values attention reads (once per request)
    kv_written_bytes: int  # the new tokens' keys and values
    gemm_flops: int  # 2 x weights x rows
    attention_flops: int  # 4 x heads x head size per (query, key) pair, every layer
    bytes: int  # the three byte counts' sum
    flops: int  # the two FLOP counts' sum


@dataclass(frozen=True, slots=True)
class Limits:
    """This machine's limits, measured on the engine's threads."""

    threads: int  # the threads they were measured on
    bandwidth_gb_s: float  # the triad's best, 3 arrays' bytes per run (GB: 1e9 bytes)
    bandwidth_runs_gb_s: list[float]  # every triad run
    array_mib: float  # each triad array (float32)
    gemm_gflop_s: float  # the large GEMM's best
    gemm_runs_gflop_s: list[float]  # every GEMM run
    gemm_size: int  # the GEMM: [size, size] x [size, size]
    gemm_dtype: str  # the step's dtype
    gemm_path: str  # the library path it took, in words
    cpu_flags: dict[str, bool]  # the instruction sets the CPU offers (saved_result.FLAGS)


@dataclass(slots=True)
class RooflineRow:
    """One step kind: its cost, its floor, and each engine's measured steps."""

    kind: str  # e.g. "decode 8 @ 1024", "prefill 512"
    batch_size: int  # decoding requests (0: a prompt alone)
    context: int  # tokens each decoding request has in the cache before a timed step (their mean)
    prompt_len: int  # tokens of the prompt chunk (0: decode only)
    cost: StepCost
    floor_ms: float  # max(bytes / bandwidth, FLOPs / GEMM peak)
    bound: str  # "memory" or "compute": which term sets the floor
    ops: OpsRow  # the measured passes, as `bench ops` records them
    fraction: dict[str, float] = field(default_factory=dict)  # engine -> floor / median step


@dataclass(slots=True)
class RooflineResult:
    """Everything `bench roofline` measured (its --json)."""

    model: str  # the model asked for ("default": the embedded one)
    engine_args: dict[str, Any]
    device: str
    dtype: str
    max_model_len: int
    limits: Limits
    shape: ModelShape
    warmup_steps: int
    steps: int  # steps timed, and as many profiled, per pass
    vllm_version: str | None = None
    rows: list[RooflineRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # step kinds clipped or left out, and why
    summary: str = ""


# ---- the model of a step ---------------------------------------------------------------------------


def model_shape(model: CausalLM, dtype: torch.dtype, kv_bytes_per_token: int) -> ModelShape:
    """A loaded model's GEMM weights and attention layers."""
    head = model.get_input_embeddings() if model.lm_head is None else model.lm_head
    layers = [m for m in model.modules() if isinstance(m, (Linear, nn.Linear)) and m is not head]
    return ModelShape(
        layer_weights=sum(m.weight.numel() for m in layers),
        lm_head_weights=head.weight.numel(),
        attention=tuple((a.num_heads, a.head_size, a.sliding_window) for a in model.attention_layers()),
        dtype_bytes=torch.empty((), dtype=dtype).element_size(),
        kv_bytes_per_token=kv_bytes_per_token,
    )


def step_cost(shape: ModelShape, batch_size: int, context: int, prompt_len: int) -> StepCost:
    """A step of `batch_size` requests decoding one token each after `context` cached tokens, and a
    prompt chunk of `prompt_len` tokens with nothing cached before it."""
    rows = batch_size + prompt_len
    logit_rows = batch_size + (1 if prompt_len else 0)  # a prompt needs its last token's logits only
    attention_flops = 0
    for heads, head_size, window in shape.attention:
        keys = context + 1 if window is None else min(context + 1, window)  # each decode query sees its own key
        pairs = batch_size * keys + sum(i if window is None else min(i, window) for i in range(1, prompt_len + 1))
        attention_flops += 4 * heads * head_size * pairs  # q.k and p.v, 2 FLOPs a multiply-add each
    weight_bytes = (shape.layer_weights + shape.lm_head_weights) * shape.dtype_bytes
    kv_read = (batch_size * (context + 1) + prompt_len) * shape.kv_bytes_per_token
    kv_written = rows * shape.kv_bytes_per_token
    gemm_flops = 2 * (shape.layer_weights * rows + shape.lm_head_weights * logit_rows)
    return StepCost(
        weight_bytes=weight_bytes,
        kv_read_bytes=kv_read,
        kv_written_bytes=kv_written,
        gemm_flops=gemm_flops,
        attention_flops=attention_flops,
        bytes=weight_bytes + kv_read + kv_written,
        flops=gemm_flops + attention_flops,
    )


def floor_ms(cost: StepCost, limits: Limits) -> tuple[float, str]:
    """The roofline's time for a step, and which limit sets it."""
    memory = cost.bytes / (limits.bandwidth_gb_s * 1e9) * 1e3
    compute = cost.flops / (limits.gemm_gflop_s * 1e9) * 1e3
    return (memory, "memory") if memory >= compute else (compute, "compute")


def fraction(floor: float, measured_ms: float) -> float:
    """The fraction of the roofline a step reaches: its floor over its measured time."""
    return floor / measured_ms


# ---- the limits ------------------------------------------------------------------------------------


def measure_limits(
    device: torch.device, dtype: torch.dtype, threads: int, array_mib: float | None, gemm_size: int, repeats: int
) -> Limits:
    """The triad's bandwidth and the GEMM peak, best of `repeats` runs each, on `threads` threads."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    if array_mib is None:
        array_mib = max(MIN_ARRAY_MIB, TRIAD_CACHE_FACTOR * largest_cache_bytes() / 2**20)
    n = max(1, int(array_mib * 2**20) // 4)
    a, b, c = (torch.full((n,), v, dtype=torch.float32, device=device) for v in (0.0, 1.0, 2.0))
    triad = _best(lambda: torch.add(b, c, alpha=3.0, out=a), sync, repeats)
    bandwidth = [3 * a.nbytes / s / 1e9 for s in triad]

    weight = Linear(gemm_size, gemm_size, bias=False)
    nn.init.normal_(weight.weight, std=0.02)
    weight = weight.to(device=device, dtype=dtype)
    path = f"torch F.linear ({dtype_name(dtype)})"
    if linear_backend(device) == "onednn" and packable(dtype):
        prepack_linear_weights(cast(CausalLM, weight), min_rows=1)  # the engine's packed oneDNN GEMM at any rows
        path = f"oneDNN packed GEMM, mkldnn._linear_pointwise ({dtype_name(dtype)})"
    x = torch.full((gemm_size, gemm_size), 0.5, dtype=dtype, device=device)
    gemm = _best(lambda: weight(x), sync, repeats)
    flops = 2 * gemm_size**3
    return Limits(
        threads=threads,
        bandwidth_gb_s=max(bandwidth),
        bandwidth_runs_gb_s=bandwidth,
        array_mib=a.nbytes / 2**20,
        gemm_gflop_s=max(flops / s / 1e9 for s in gemm),
        gemm_runs_gflop_s=[flops / s / 1e9 for s in gemm],
        gemm_size=gemm_size,
        gemm_dtype=dtype_name(dtype),
        gemm_path=path,
        cpu_flags=machine()["flags"] if device.type == "cpu" else {},
    )


def _best(run: Callable[[], Any], sync: Callable[[], None], repeats: int) -> list[float]:
    """Seconds of each of `repeats` timed runs, after one untimed."""
    run()
    sync()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        sync()
        seconds.append(time.perf_counter() - start)
    return seconds


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# ---- the run ---------------------------------------------------------------------------------------


def step_kinds(
    args: argparse.Namespace, max_model_len: int, budget: int
) -> tuple[list[tuple[int, int, int]], list[str]]:
    """(batch size, prompt context, prompt chunk) of each step kind asked, prompt chunks clipped to what
    one step of this engine can compute; and a note per clipped chunk."""
    kinds = [(b, ctx, 0) for b in args.batch_sizes for ctx in args.contexts]
    notes = []
    limit = min(max_model_len - 1, budget)  # the chunk and its one output token; one step's token budget
    for chunk in args.prompt_lens:
        if chunk > limit:
            why = f"max_model_len {max_model_len}" if limit == max_model_len - 1 else f"the step budget {budget}"
            notes.append(f"prefill {chunk} clipped to {limit} tokens ({why})")
            chunk = limit
        if (0, 0, chunk) not in kinds:
            kinds.append((0, 0, chunk))
    return kinds, notes


def run(args: argparse.Namespace) -> RooflineResult:
    with ExitStack() as stack:
        engines = start_ours(args, stack)
        info, config = engines.info, engines.config
        device = config.torch_device
        if device.type == "cpu":  # the steps and the limits on the threads the EngineCore child computes with
            stack.callback(torch.set_num_threads, torch.get_num_threads())
            torch.set_num_threads(engine_threads(config))
        kinds, notes = step_kinds(args, info.max_model_len, config.max_num_batched_tokens)
        runnable = []
        for batch_size, context, chunk in kinds:
            try:
                check_decode_capacity(info, batch_size, context, steps_per_pass(args), chunk)
                check_budget(config, batch_size, chunk)
            except ValueError as exc:  # its message names bench ops' flag for the context
                why = str(exc).replace("--input-len", "--contexts")
                notes.append(f"{_kind(batch_size, context, chunk)} left out: {why}")
                continue
            runnable.append((batch_size, context, chunk))
        if not runnable:
            more = f" (and {len(kinds) - 1} more step kinds)" if len(kinds) > 1 else ""
            raise ValueError(f"no step kind fits this engine: {notes[-1]}{more}")
        model = engines.core.runner.model
        dtype = next(model.parameters()).dtype
        limits = measure_limits(
            device, dtype, torch.get_num_threads(), args.array_mib, args.gemm_size, args.limit_repeats
        )
        result = RooflineResult(
            model=engines.kwargs["model"] or "default",
            engine_args=engines.kwargs,
            device=info.device,
            dtype=info.dtype,
            max_model_len=info.max_model_len,
            limits=limits,
            shape=model_shape(model, dtype, info.kv_bytes_per_token),
            warmup_steps=args.warmup_steps,
            steps=args.steps,
            notes=notes,
        )
        result.vllm_version = start_vllm(engines, args, stack)
        rng = np.random.default_rng(config.seed)
        for batch_size, context, chunk in runnable:
            ops_row = measure_shape(engines, rng, batch_size, chunk, context, args)
            # the timed steps' mean context: the batch decodes --warmup-steps first, then one token a step
            mean_context = context + args.warmup_steps + (args.steps - 1) // 2 if batch_size else 0
            cost = step_cost(result.shape, batch_size, mean_context, chunk)
            floor, bound = floor_ms(cost, limits)
            row = RooflineRow(
                _kind(batch_size, context, chunk), batch_size, mean_context, chunk, cost, floor, bound, ops_row
            )
            row.fraction = {engine: fraction(floor, ms["step"]) for engine, ms in ops_row.median_ms.items()}
            result.rows.append(row)
    result.summary = report.roofline_summary(result)
    return result


def _kind(batch_size: int, context: int, chunk: int) -> str:
    return f"prefill {chunk}" if not batch_size else f"decode {batch_size} @ {context}"


def main(args: argparse.Namespace) -> int:
    allocate_as_the_engine_child(args)
    result = run(args)
    report.print_roofline(result)
    report.finish(result, args)
    return 0
