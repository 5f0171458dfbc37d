"""`enginetui bench scheduling`: synchronous steps against asynchronous scheduling, side by side.

For each mode (--modes sync async) it measures:
- decode at fixed batch sizes (--batch-sizes 1 16 64): an in-process EngineCore (no busy loop) is
  filled with N requests, warmed up, then timed over --steps busy-loop steps; TPOT is the wall time
  per step (each applies one token of every request), throughput N / TPOT. From the step events'
  phases: the busy loop's own work (schedule + update) as a share of the step, and the part of it
  that ran while the model thread executed (hidden by the overlap; 0 for synchronous steps).
- the workload (--preset, default quick; mixed is the issue's): LLM.generate end to end in the
  engine's child process; output tokens/s and the mean TPOT of the requests.
The figures mean something only on a quiet machine: every mode runs in turn, once.
"""

import argparse
import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from enginetui.bench import report
from enginetui.bench.decode_batch import start_decode_batch, timed_steps
from enginetui.bench.engines import bench_engine_kwargs, bench_workload
from enginetui.bench.workload import prompts_of, spec_from_args
from enginetui.core import LLM, SamplingParams
from enginetui.core.config import EngineConfig
from enginetui.core.engine.core import EngineCore
from enginetui.core.engine.events import StepPhase
from enginetui.core.engine.output_processor import OutputProcessor
from enginetui.core.engine.processor import Processor

MODES = {"sync": False, "async": True}  # mode name -> async_scheduling


@dataclass(slots=True)
class DecodeRow:
    """Steady decode at one batch size in one mode."""

    mode: str  # sync | async
    batch_size: int  # running decode requests
    steps: int  # busy-loop steps timed
    tpot_ms: float  # wall time per step: the time between a request's tokens
    tokens_per_s: float  # batch_size / TPOT
    busy_loop_pct: float  # schedule + update time, % of the step
    hidden_pct: float  # of the step, busy-loop time that ran while the model thread executed


@dataclass(slots=True)
class WorkloadRow:
    """The workload through LLM.generate in one mode."""

    mode: str  # sync | async
    elapsed_s: float  # wall time of LLM.generate
    output_tokens: int  # tokens generated
    output_tokens_per_s: float  # output_tokens / elapsed_s
    mean_tpot_ms: float  # mean over requests of (finished - first token) / (tokens - 1)


@dataclass(slots=True)
class SchedulingResult:
    """Everything `bench scheduling` measured (its --json)."""

    engine_args: dict[str, Any]  # the engine arguments used (async_scheduling set per mode)
    decode: list[DecodeRow] = field(default_factory=list)  # per mode and batch size
    workload: list[WorkloadRow] = field(default_factory=list)  # per mode
    summary: str = ""  # the one-line summary printed last


def overlap_ms(phases: list[StepPhase]) -> tuple[float, float]:
    """(busy-loop ms, of which while an execution ran) over these phases (wall-clock spans)."""
    executes = sorted((p.start, p.end) for p in phases if p.name == "execute")
    busy = [(p.start, p.end) for p in phases if p.name != "execute"]
    total = sum(end - start for start, end in busy)
    hidden = 0.0
    for start, end in busy:
        for ex_start, ex_end in executes:
            hidden += max(0.0, min(end, ex_end) - max(start, ex_start))
    return total * 1e3, hidden * 1e3


def decode_row(
    config: EngineConfig, mode: str, batch_size: int, input_len: int, warmup_steps: int, steps: int
) -> DecodeRow:
    core = EngineCore(config)
    try:
        info = core.describe(os.getpid())
        processor, output_processor = Processor(None, info), OutputProcessor(None, stream=False)
        rng = np.random.default_rng(0)
        prompts = [rng.integers(0, info.vocab_size, input_len).tolist() for _ in range(batch_size)]
        start_decode_batch(core, processor, output_processor, prompts, 1.0, f"{mode}-{batch_size}")
        for _ in range(warmup_steps):
            core.step()
        phases: list[StepPhase] = []
        elapsed_ms = 0.0
        for seconds, _, event in timed_steps(core, steps, batch_size):
            elapsed_ms += seconds * 1e3
            phases += event.phases if event is not None else []
    finally:
        core.close()
    tpot = elapsed_ms / steps
    busy, hidden = overlap_ms(phases)
    return DecodeRow(
        mode=mode,
        batch_size=batch_size,
        steps=steps,
        tpot_ms=tpot,
        tokens_per_s=batch_size * 1e3 / tpot,
        busy_loop_pct=100.0 * busy / elapsed_ms,
        hidden_pct=100.0 * hidden / elapsed_ms,
    )


def workload_row(kwargs: dict[str, Any], mode: str, prompts: list[list[int]], output_lens: list[int]) -> WorkloadRow:
    llm = LLM(**kwargs)
    try:
        params = [SamplingParams(temperature=1.0, ignore_eos=True, max_tokens=n) for n in output_lens]
        start = time.perf_counter()
        outs = llm.generate([list(p) for p in prompts], params, use_tqdm=False)
        elapsed = time.perf_counter() - start
    finally:
        llm.shutdown()
    tokens = sum(len(o.outputs[0].token_ids) for o in outs)
    tpots = [
        (o.metrics.finished_time - o.metrics.first_token_time) * 1e3 / (len(o.outputs[0].token_ids) - 1)
        for o in outs
        if len(o.outputs[0].token_ids) > 1
    ]
    return WorkloadRow(
        mode=mode,
        elapsed_s=elapsed,
        output_tokens=tokens,
        output_tokens_per_s=tokens / elapsed,
        mean_tpot_ms=sum(tpots) / len(tpots) if tpots else 0.0,
    )


def run(args: argparse.Namespace) -> SchedulingResult:
    kwargs = bench_engine_kwargs(args)
    kwargs.pop("async_scheduling", None)  # set per mode
    result = SchedulingResult(engine_args=kwargs)
    workload = bench_workload(spec_from_args(args), kwargs)
    for mode in args.modes:
        config = EngineConfig(**kwargs, async_scheduling=MODES[mode])
        for n in args.batch_sizes:
            result.decode.append(decode_row(config, mode, n, args.decode_prompt_len, args.warmup_steps, args.steps))
        result.workload.append(
            workload_row(
                dict(kwargs, async_scheduling=MODES[mode]),
                mode,
                prompts_of(workload),
                [r.output_len for r in workload],
            )
        )
    result.summary = summary(result)
    return result


def summary(result: SchedulingResult) -> str:
    by_mode = {row.mode: row for row in result.workload}
    if {"sync", "async"} <= set(by_mode):
        ratio = by_mode["async"].output_tokens_per_s / by_mode["sync"].output_tokens_per_s
        return (
            f"workload: async {by_mode['async'].output_tokens_per_s:.1f} tok/s vs sync "
            f"{by_mode['sync'].output_tokens_per_s:.1f} tok/s ({ratio:.2f}x); measure on a quiet machine"
        )
    row = result.workload[0]
    return f"workload ({row.mode}): {row.output_tokens_per_s:.1f} output tok/s; measure on a quiet machine"


def print_result(result: SchedulingResult) -> None:
    print(f"{'mode':<6} {'batch':>5} {'TPOT ms':>9} {'tok/s':>9} {'busy loop %':>11} {'hidden %':>9}")
    for row in result.decode:
        print(
            f"{row.mode:<6} {row.batch_size:>5} {row.tpot_ms:>9.2f} {row.tokens_per_s:>9.1f} "
            f"{row.busy_loop_pct:>11.1f} {row.hidden_pct:>9.1f}"
        )
    print(f"{'mode':<6} {'workload s':>10} {'out tok/s':>10} {'mean TPOT ms':>12}")
    for w in result.workload:
        print(f"{w.mode:<6} {w.elapsed_s:>10.2f} {w.output_tokens_per_s:>10.1f} {w.mean_tpot_ms:>12.2f}")


def main(args: argparse.Namespace) -> int:
    result = run(args)
    print_result(result)
    report.finish(result, args)
    return 0
