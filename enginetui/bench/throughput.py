"""`enginetui bench throughput`: offline throughput, like `vllm bench throughput`.

The whole workload goes to `LLM.generate` at once (random token-id prompts, ignore_eos, a fixed
output length per request) and is timed end to end. Options measure the step-event cost (the
engine with events off, on, or on with a live subscriber; runs interleaved, best of N kept) and
compare against Hugging Face `generate` on the same prompts and the same weights.
"""

import argparse
import time
from dataclasses import dataclass, field
from typing import Any

from core import LLM, SamplingParams
from enginetui.bench import report
from enginetui.bench.engines import bench_engine_kwargs, model_vocab_size, shared_weights
from enginetui.bench.event_counter import EventCounter, StepCounts
from enginetui.bench.hf_baseline import HFRun, load_hf_model, run_hf
from enginetui.bench.workload import BenchRequest, WorkloadSpec, make_workload, spec_from_args, warmup_workload


@dataclass(slots=True)
class EngineRun:
    """One timed pass of our engine over the whole workload."""

    events: str  # off | on | subscriber
    repeat: int  # which pass (0-based)
    elapsed_s: float  # wall time of LLM.generate
    num_requests: int  # requests in the workload
    prompt_tokens: int  # prompt tokens, prefix-cache hits included
    output_tokens: int  # tokens generated (checked equal to the workload's)
    requests_per_s: float  # num_requests / elapsed
    total_tokens_per_s: float  # (prompt + output tokens) / elapsed
    output_tokens_per_s: float  # output tokens / elapsed
    cached_prompt_tokens: int  # prompt tokens served by the prefix cache
    steps: StepCounts | None  # what the steps computed, from the live subscriber (subscriber mode only)


@dataclass(slots=True)
class ThroughputResult:
    """Everything `bench throughput` measured (its --json)."""

    workload: WorkloadSpec  # how the requests were drawn
    prompt_tokens: int  # total prompt tokens of the workload
    output_tokens: int  # total output tokens of the workload
    model: str  # the model asked for ("default": the embedded one)
    engine_args: dict[str, Any]  # the engine arguments used; our engine keeps its defaults otherwise
    device: str  # where it ran
    dtype: str  # compute dtype
    runs: list[EngineRun]  # every timed pass, in the order run
    best: dict[str, EngineRun]  # events mode -> its fastest pass
    events_ratio: dict[str, float] = field(default_factory=dict)  # mode -> throughput / throughput with events off
    hf_runs: list[HFRun] = field(default_factory=list)  # the baseline at each batch size tried
    hf_best: HFRun | None = None  # the baseline's fastest batch size
    hf_ratio: float | None = None  # our best output tok/s / the baseline's best
    summary: str = ""  # the one-line summary printed last


def benchmark_engine(engine_kwargs: dict[str, Any], workload: list[BenchRequest], modes: list[str],
                     repeats: int) -> tuple[list[EngineRun], dict[str, str]]:
    """Time our engine on the workload once per mode and repeat (modes interleaved within a repeat).

    Returns the runs and where the engine ran (device, dtype).
    """
    engines: dict[str, tuple[LLM, EventCounter | None]] = {}
    try:
        for mode in modes:
            llm = LLM(**engine_kwargs, enable_step_events=mode != "off")
            engines[mode] = (llm, None)
            if mode == "subscriber":
                address = getattr(llm.engine.client, "events_address", None)
                if address is None:
                    raise ValueError("--events subscriber needs the multiprocess engine (unset ENGINETUI_MULTIPROC=0)")
                engines[mode] = (llm, EventCounter(address))
            warmup = warmup_workload(llm.engine.info.vocab_size)
            llm.generate([r.prompt_token_ids for r in warmup], _params(warmup), use_tqdm=False)
        runs = [time_engine(*engines[mode], workload, mode, repeat) for repeat in range(repeats) for mode in modes]
        info = engines[modes[0]][0].engine.info
        return runs, {"device": info.device, "dtype": info.dtype}
    finally:
        for llm, counter in engines.values():
            if counter is not None:
                counter.close()
            llm.shutdown()


def time_engine(llm: LLM, counter: EventCounter | None, workload: list[BenchRequest], mode: str,
                repeat: int) -> EngineRun:
    """One timed LLM.generate over the workload, from a cold prefix cache."""
    client = llm.engine.client
    client.reset_prefix_cache()  # earlier passes must not serve this one's prompts
    first_step = client.snapshot().step if counter is not None else 0
    prompts = [r.prompt_token_ids for r in workload]
    params = _params(workload)
    start = time.perf_counter()
    outputs = llm.generate(prompts, params, use_tqdm=False)
    elapsed = time.perf_counter() - start
    output_tokens = sum(len(o.outputs[0].token_ids) for o in outputs)
    expected = sum(r.output_len for r in workload)
    if output_tokens != expected:
        raise RuntimeError(f"the engine generated {output_tokens} tokens, the workload asks for {expected}")
    steps = None
    if counter is not None:
        last_step = client.snapshot().step
        counter.wait_for_step(last_step)
        steps = counter.counts(first_step, last_step)
    prompt_tokens = sum(len(p) for p in prompts)
    return EngineRun(
        events=mode, repeat=repeat, elapsed_s=elapsed, num_requests=len(workload), prompt_tokens=prompt_tokens,
        output_tokens=output_tokens, requests_per_s=len(workload) / elapsed,
        total_tokens_per_s=(prompt_tokens + output_tokens) / elapsed, output_tokens_per_s=output_tokens / elapsed,
        cached_prompt_tokens=sum(o.num_cached_tokens for o in outputs), steps=steps,
    )


def _params(workload: list[BenchRequest]) -> list[SamplingParams]:
    """Fixed-length sampling at temperature 1 (as vLLM's throughput benchmark)."""
    return [SamplingParams(temperature=1.0, top_p=1.0, ignore_eos=True, max_tokens=r.output_len) for r in workload]


def run(args: argparse.Namespace) -> ThroughputResult:
    """The whole `bench throughput` command: engine runs, then the baseline if asked."""
    spec = spec_from_args(args)
    kwargs = bench_engine_kwargs(args)
    workload = make_workload(spec, model_vocab_size(kwargs))
    modes = list(dict.fromkeys(args.events))
    if args.compare == "hf":
        report.quiet_transformers()
        with shared_weights(kwargs) as (shared_kwargs, hf_dir):
            runs, info = benchmark_engine(shared_kwargs, workload, modes, args.repeats)
            model = load_hf_model(hf_dir, info["dtype"], info["device"])
            sizes = sorted({min(b, len(workload)) for b in args.hf_batch_sizes})
            hf_runs = [run_hf(model, workload, b) for b in sizes]
    else:
        runs, info = benchmark_engine(kwargs, workload, modes, args.repeats)
        hf_runs = []
    best = {mode: max((r for r in runs if r.events == mode), key=lambda r: r.output_tokens_per_s) for mode in modes}
    result = ThroughputResult(
        workload=spec, prompt_tokens=runs[0].prompt_tokens, output_tokens=runs[0].output_tokens,
        model=kwargs["model"] or "default", engine_args=kwargs, runs=runs, best=best, **info,
    )
    if "off" in best and len(best) > 1:
        off = best["off"].output_tokens_per_s
        result.events_ratio = {m: r.output_tokens_per_s / off for m, r in best.items() if m != "off"}
    if hf_runs:
        result.hf_runs = hf_runs
        result.hf_best = max(hf_runs, key=lambda r: r.output_tokens_per_s)
        result.hf_ratio = max(r.output_tokens_per_s for r in best.values()) / result.hf_best.output_tokens_per_s
    result.summary = report.throughput_summary(result)
    return result


def main(args: argparse.Namespace) -> int:
    result = run(args)
    report.print_throughput(result)
    report.finish(result, args.json)
    return 0
