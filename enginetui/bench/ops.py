"""`enginetui bench ops`: where a decode step's milliseconds go, operator by operator, in this engine
and (`--compare vllm`) in vLLM, on the same weights, prompts and batch, one machine, in turns.

Each engine runs in one process with its EngineCore inside (ours in this process, as `bench profile`
runs it; vLLM's in its runner with VLLM_ENABLE_V1_MULTIPROCESSING=0), fills a batch of N requests
of --input-len random prompt tokens, decodes --warmup-steps, then times --steps decode steps
plainly and --steps more under the torch profiler (step_profiler.py, the same code for both). The
profiler's self time of each operator goes to a kind of work (op_kinds.py): attention, KV writes,
GEMMs, sampling, torch.compile'd regions, other operators, and what no operator covers (Python and
the framework). The engines take turns, --repeats times per batch size; medians are reported, with
the range of the passes.
"""

import argparse
import os
import statistics
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from enginetui.bench import report
from enginetui.bench.engines import allocate_as_the_engine_child, bench_engine_kwargs, shared_weights
from enginetui.bench.op_kinds import ORDER, ms_per_kind
from enginetui.bench.profile import check_decode_capacity, end_decode_batch, start_decode_batch
from enginetui.bench.step_profiler import profile_steps
from enginetui.bench.vllm_peer import VLLMPeer, vllm_engine_kwargs, vllm_python
from enginetui.core.config import EngineConfig
from enginetui.core.engine.core import EngineCore
from enginetui.core.engine.output_processor import OutputProcessor
from enginetui.core.engine.processor import Processor
from enginetui.core.engine.tokenizer import load_tokenizer

TOP_OPS = 8  # operators listed by name per engine and batch size


@dataclass(slots=True)
class OpsPass:
    """One engine's measured decode steps at one batch size, one pass."""

    engine: str  # "ours" or "vllm"
    repeat: int  # 0-based pass number
    step_ms: list[float]  # each plainly timed step's wall time
    profiled_step_ms: float  # mean wall time of the profiled steps (the profiler adds its own cost)
    kind_ms: dict[str, float]  # op_kinds.ORDER -> ms per profiled step
    top_ops: list[tuple[str, float, int]]  # the TOP_OPS costliest operators: name, self ms per step, calls per step

    def ms(self, kind: str) -> float:
        """This pass's ms per step of a kind (op_kinds.ORDER), or for "step" its median plain step."""
        return statistics.median(self.step_ms) if kind == "step" else self.kind_ms[kind]


@dataclass(slots=True)
class OpsRow:
    """Both engines at one batch size."""

    batch_size: int  # decoding requests in every measured step
    passes: list[OpsPass] = field(default_factory=list)  # in the order they ran (the engines in turns)
    median_ms: dict[str, dict[str, float]] = field(default_factory=dict)  # engine -> kind (and "step") -> median ms


@dataclass(slots=True)
class OpsResult:
    """Everything `bench ops` measured (its --json)."""

    model: str  # the model asked for ("default": the embedded one)
    engine_args: dict[str, Any]  # our engine's arguments
    device: str  # where it ran
    dtype: str  # compute dtype
    input_len: int  # prompt tokens of each request
    warmup_steps: int  # decode steps before the measured ones
    steps: int  # decode steps timed, and as many profiled, per pass
    temperature: float  # sampling temperature of every request
    vllm_version: str | None = None  # with --compare vllm
    rows: list[OpsRow] = field(default_factory=list)  # one per batch size
    summary: str = ""  # the one-line summary printed last


def measure_ours(core: EngineCore, processor: Processor, output_processor: OutputProcessor, prompts: list[list[int]],
                 warmup_steps: int, steps: int, temperature: float, repeat: int) -> OpsPass:
    """Our engine's pass: the batch filled, warmed up, then timed and profiled; aborted after."""
    req_ids = start_decode_batch(core, processor, output_processor, prompts, temperature, f"ops-{repeat}")
    running: list[int] = []

    def step() -> None:
        running.append(len(core.scheduler.running))
        output_processor.process(core.step()[0].outputs)

    for _ in range(warmup_steps):
        step()
    measured = profile_steps(step, steps)
    end_decode_batch(core, output_processor, req_ids)
    _check_batch(running, len(prompts), "ours")
    return _pass("ours", repeat, measured, steps)


def measure_vllm(peer: VLLMPeer, prompts: list[list[int]], max_tokens: int, warmup_steps: int, steps: int,
                 temperature: float, repeat: int) -> OpsPass:
    """vLLM's pass, the same way in its runner."""
    measured = peer.ops(prompts, max_tokens, warmup_steps, steps, temperature)
    _check_batch(measured["batch_sizes"], len(prompts), "vLLM")
    return _pass("vllm", repeat, measured, steps)


def _check_batch(sizes: list[int], expected: int, engine: str) -> None:
    if any(n != expected for n in sizes):
        raise RuntimeError(f"{engine}: a measured step ran {min(sizes)}-{max(sizes)} requests, not {expected} "
                           f"(KV pool or max_model_len too small for --input-len and --steps?)")


def _pass(engine: str, repeat: int, measured: dict, steps: int) -> OpsPass:
    ops = {name: (us, calls) for name, (us, calls) in measured["ops"].items()}
    top = sorted(ops.items(), key=lambda kv: -kv[1][0])[:TOP_OPS]
    return OpsPass(
        engine=engine, repeat=repeat, step_ms=measured["step_ms"], profiled_step_ms=measured["profiled_step_ms"],
        kind_ms=ms_per_kind(ops, steps, measured["profiled_step_ms"]),
        top_ops=[(name, us / 1e3 / steps, calls // steps) for name, (us, calls) in top],
    )


def medians(passes: list[OpsPass]) -> dict[str, float]:
    """Median over passes of each kind's ms, and "step": of each pass's median plain step."""
    return {kind: statistics.median(p.ms(kind) for p in passes) for kind in (*ORDER, "step")}


def run(args: argparse.Namespace) -> OpsResult:
    kwargs = bench_engine_kwargs(args)
    python = vllm_python(args.vllm_python) if "vllm" in args.compare else None  # fail before any engine runs
    with ExitStack() as stack:
        engine_kwargs, weights_dir = kwargs, None
        if python is not None:
            report.quiet_transformers()
            engine_kwargs, weights_dir = stack.enter_context(shared_weights(kwargs))
        config = EngineConfig(**engine_kwargs)
        core = EngineCore(config)
        stack.callback(core.close)
        info = core.describe(os.getpid())
        tokenizer = load_tokenizer(config, info.model_dir)
        processor, output_processor = Processor(tokenizer, info), OutputProcessor(tokenizer, stream=False)
        result = OpsResult(model=kwargs["model"] or "default", engine_args=kwargs, device=info.device,
                           dtype=info.dtype, input_len=args.input_len, warmup_steps=args.warmup_steps,
                           steps=args.steps, temperature=args.temperature)
        peer = None
        if python is not None:
            peer = stack.enter_context(VLLMPeer(python, str(weights_dir), vllm_engine_kwargs(engine_kwargs, info.dtype),
                                                args.vllm_cores, in_process=True))
            result.vllm_version = peer.version
        for batch_size in args.batch_sizes:  # every batch, before any is measured
            check_decode_capacity(info, batch_size, args.input_len, args.warmup_steps + 2 * args.steps)
        rng = np.random.default_rng(config.seed)
        for batch_size in args.batch_sizes:
            prompts = [rng.integers(0, info.vocab_size, size=args.input_len).tolist() for _ in range(batch_size)]
            row = OpsRow(batch_size=batch_size)
            for repeat in range(args.repeats):  # in turns: a drift of the machine hits both engines alike
                row.passes.append(measure_ours(core, processor, output_processor, prompts, args.warmup_steps,
                                               args.steps, args.temperature, repeat))
                if peer is not None:
                    row.passes.append(measure_vllm(peer, prompts, info.max_model_len - args.input_len,
                                                   args.warmup_steps, args.steps, args.temperature, repeat))
            for engine in dict.fromkeys(p.engine for p in row.passes):
                row.median_ms[engine] = medians([p for p in row.passes if p.engine == engine])
            result.rows.append(row)
    result.summary = report.ops_summary(result)
    return result


def main(args: argparse.Namespace) -> int:
    allocate_as_the_engine_child(args)
    result = run(args)
    report.print_ops(result)
    report.finish(result, args.json)
    return 0
