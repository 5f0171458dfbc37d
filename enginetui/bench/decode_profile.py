"""`enginetui bench profile`: where a decode step's time goes, at several batch sizes.

Drives an EngineCore directly in this process (no busy loop, so every `step()` is timed alone and
`EngineCore.last_timings` belongs to it), fills it with N requests, waits until all N are
decoding, warms up, then averages the per-stage timings of the next steps. Stages: schedule,
prepare (apply the plan's deltas, pack inputs), forward (model + lm_head), sample, update
(scheduler.update_from_output), event (build the StepEvent; not serialized or sent here).
"Engine overhead" is everything but forward + sample, as a share of the step. "client" is the
client-side output processing of a step's outputs (detokenize, assemble RequestOutputs), shown
apart and not part of the shares. On CUDA, forward launches kernels asynchronously; the
sampler's copy to the host waits for them, so some forward time shows as sample time.
On CPU this process first takes the EngineCore child's allocator settings
(core/worker/cpu_tuning.py), so the steps timed here cost what they cost in the child.
"""

import argparse
import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from enginetui.bench import plot, report
from enginetui.bench.decode_batch import check_decode_capacity, end_decode_batch, start_decode_batch, timed_steps
from enginetui.bench.engines import allocate_as_the_engine_child, bench_engine_kwargs
from enginetui.core.config import EngineConfig
from enginetui.core.engine.core import EngineCore
from enginetui.core.engine.output_processor import OutputProcessor
from enginetui.core.engine.processor import Processor
from enginetui.core.engine.tokenizer import load_tokenizer

STAGES = ("schedule", "prepare", "forward", "sample", "update", "event")  # EngineCore.last_timings keys
COMPUTE_STAGES = ("forward", "sample")  # the rest is engine overhead


@dataclass(slots=True)
class ProfileRow:
    """The averaged decode step at one batch size."""

    batch_size: int  # running decode requests
    steps: int  # decode steps averaged
    step_ms: float  # mean EngineCore.step time (sum of the stages)
    stage_ms: dict[str, float]  # stage -> mean ms
    stage_share: dict[str, float]  # stage -> % of step_ms (sums to 100)
    overhead_pct: float  # everything but forward + sample, % of step_ms
    client_ms: float  # mean time per step outside EngineCore.step (client-side output processing)
    tokens_per_s: float  # batch_size / (step_ms + client_ms)


@dataclass(slots=True)
class ProfileResult:
    """Everything `bench profile` measured (its --json)."""

    model: str  # the model asked for ("default": the embedded one)
    engine_args: dict[str, Any]  # the engine arguments used (defaults otherwise)
    device: str  # where it ran
    dtype: str  # compute dtype
    input_len: int  # prompt tokens of each request
    warmup_steps: int  # decode steps run before measuring
    rows: list[ProfileRow] = field(default_factory=list)  # one per batch size
    summary: str = ""  # the one-line summary printed last


def profile_decode(
    core: EngineCore,
    processor: Processor,
    output_processor: OutputProcessor,
    batch_size: int,
    input_len: int,
    warmup_steps: int,
    steps: int,
    seed: int = 0,
) -> ProfileRow:
    """Average `steps` decode steps with `batch_size` requests running (after `warmup_steps`)."""
    info = processor.info
    check_decode_capacity(info, batch_size, input_len, warmup_steps + steps)
    rng = np.random.default_rng(seed)
    prompts = [rng.integers(0, info.vocab_size, size=input_len).tolist() for _ in range(batch_size)]
    req_ids = start_decode_batch(core, processor, output_processor, prompts, 1.0, f"profile-{batch_size}")
    for _ in range(warmup_steps):
        output_processor.process(core.step()[0].outputs)
    totals = dict.fromkeys(STAGES, 0.0)
    client_ms = 0.0
    for _, outputs, _ in timed_steps(core, steps, batch_size):
        start = time.perf_counter()
        output_processor.process(outputs.outputs)
        client_ms += (time.perf_counter() - start) * 1e3
        for stage in STAGES:
            totals[stage] += core.last_timings[stage]
    end_decode_batch(core, output_processor, req_ids)
    stage_ms = {s: totals[s] / steps for s in STAGES}
    step_ms = sum(stage_ms.values())
    overhead = sum(v for s, v in stage_ms.items() if s not in COMPUTE_STAGES)
    return ProfileRow(
        batch_size=batch_size,
        steps=steps,
        step_ms=step_ms,
        stage_ms=stage_ms,
        stage_share={s: 100.0 * v / step_ms for s, v in stage_ms.items()},
        overhead_pct=100.0 * overhead / step_ms,
        client_ms=client_ms / steps,
        tokens_per_s=batch_size * 1e3 / (step_ms + client_ms / steps),
    )


def run(args: argparse.Namespace) -> ProfileResult:
    kwargs = bench_engine_kwargs(args)
    config = EngineConfig(**kwargs)
    core = EngineCore(config)
    info = core.describe(os.getpid())
    tokenizer = load_tokenizer(config, info.model_dir)
    processor, output_processor = Processor(tokenizer, info), OutputProcessor(tokenizer, stream=False)
    result = ProfileResult(
        model=kwargs["model"] or "default",
        engine_args=kwargs,
        device=info.device,
        dtype=info.dtype,
        input_len=args.input_len,
        warmup_steps=args.warmup_steps,
    )
    for n in args.batch_sizes:
        result.rows.append(
            profile_decode(core, processor, output_processor, n, args.input_len, args.warmup_steps, args.steps)
        )
    result.summary = report.profile_summary(result)
    return result


def main(args: argparse.Namespace) -> int:
    allocate_as_the_engine_child(args)
    result = run(args)
    report.print_profile(result)
    if args.plot:
        plot.save_plot(plot.profile_figure, result, args.plot)
    report.finish(result, args)
    return 0
