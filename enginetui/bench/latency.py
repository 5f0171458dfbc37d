"""`enginetui bench latency`: online serving latency, like `vllm bench serve`.

Requests of the workload arrive by a seeded Poisson process at --request-rate (inf: all at once), the
simulator's schedule (enginetui/simulate/arrivals.py),
and stream through AsyncLLM (with --compare vllm, also through vLLM's AsyncLLM on the same weights
and arrivals; with --competing, also beside a busy process or the attached dashboard). Per request, measured on the client: TTFT (arrival to first token),
TPOT (mean time per output token after the first), ITL (gap between successive streamed outputs),
end-to-end latency; plus throughput over the whole run.
"""

import argparse
import asyncio
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from enginetui.bench import plot, report
from enginetui.bench.competing import DashboardCost, competing, mode_label
from enginetui.bench.engines import bench_engine_kwargs, bench_workload, shared_weights
from enginetui.bench.vllm_peer import VLLM_COMPETING, VLLMPeer, vllm_engine_kwargs
from enginetui.bench.workload import WorkloadSpec, spec_from_args, total_output_len, warmup_workload
from enginetui.core import SamplingParams
from enginetui.core.record.recorder import RecordingSummary
from enginetui.latency_figures import Latency
from enginetui.simulate.arrivals import arrival_times, with_arrivals
from enginetui.simulate.workload import SimRequest, prompt_token_ids
from enginetui.vllm_launch import vllm_python


@dataclass(slots=True)
class RequestTiming:
    """One request as the client saw it (seconds, time.perf_counter())."""

    sent: float  # when it was handed to AsyncLLM.generate
    token_times: list[float] = field(default_factory=list)  # when each output carrying new tokens arrived
    num_output_tokens: int = 0  # tokens generated
    done: float = 0.0  # when its final output arrived


def request_latencies(timings: list[RequestTiming]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each request's TTFT, TPOT (NaN for a one-token request: it has none) and E2E, milliseconds."""
    ttft = np.array([t.token_times[0] - t.sent for t in timings]) * 1e3  # [requests]
    tpot = (
        np.array(
            [
                (t.done - t.token_times[0]) / (t.num_output_tokens - 1) if t.num_output_tokens > 1 else np.nan
                for t in timings
            ]
        )
        * 1e3
    )  # [requests]
    e2e = np.array([t.done - t.sent for t in timings]) * 1e3  # [requests]
    return ttft, tpot, e2e


@dataclass(slots=True)
class LatencyRun:
    """One engine's pass over the workload, as its client saw it."""

    engine: str  # enginetui | vllm-default | vllm-all
    competing: str  # none | busy | dashboard: what else ran during the pass
    duration_s: float  # first arrival to last completion
    requests_per_s: float  # completed requests / duration
    output_tokens_per_s: float  # output tokens / duration
    total_tokens_per_s: float  # (prompt + output tokens) / duration
    ttft_ms: Latency  # time to first token
    tpot_ms: Latency  # time per output token after the first (requests with 2+ tokens)
    itl_ms: Latency  # inter-token latency: every gap between streamed outputs
    e2e_ms: Latency  # end-to-end request latency
    dashboard: DashboardCost | None = None  # what the attached dashboard used (competing dashboard only)

    @property
    def label(self) -> str:
        return mode_label(self.engine, self.competing)


@dataclass(slots=True)
class LatencyResult:
    """Everything `bench latency` measured (its --json)."""

    workload: WorkloadSpec  # how the requests were drawn
    prompt_tokens: int  # total prompt tokens of the workload
    output_tokens: int  # total output tokens generated
    request_rate: float | None  # mean arrivals per second (None: all at once)
    temperature: float  # sampling temperature of every request (0: greedy)
    model: str  # the model asked for ("default": the embedded one)
    engine_args: dict[str, Any]  # the engine arguments used; our engine keeps its defaults otherwise
    runs: list[LatencyRun]  # ours under each competing load, then vLLM's (first: ours alone)
    vllm_version: str | None = None  # the peer's version, when compared
    recording: RecordingSummary | None = None  # what --record wrote
    summary: str = ""  # the one-line summary printed last


async def _one_request(engine, request_id: str, req: SimRequest, t0: float, temperature: float) -> RequestTiming:
    await asyncio.sleep(max(0.0, t0 + req.arrival - time.perf_counter()))
    params = SamplingParams(temperature=temperature, top_p=1.0, ignore_eos=True, max_tokens=req.output_len)
    timing = RequestTiming(sent=time.perf_counter())
    async for out in engine.generate(prompt_token_ids(req), params, request_id):
        now = time.perf_counter()
        num_tokens = len(out.outputs[0].token_ids)
        if num_tokens > timing.num_output_tokens:
            timing.token_times.append(now)
            timing.num_output_tokens = num_tokens
        if out.finished:
            timing.done = now
    return timing


async def measure(
    engine, workload: list[SimRequest], temperature: float, prefix: str = "bench"
) -> tuple[list[RequestTiming], float]:
    """Send the workload, each request at its arrival; the timings and the run's duration."""
    t0 = time.perf_counter()
    timings = await asyncio.gather(
        *(_one_request(engine, f"{prefix}-{i}", r, t0, temperature) for i, r in enumerate(workload))
    )
    return list(timings), max(t.done for t in timings) - t0


def summarize(
    engine: str,
    competing_load: str,
    workload: list[SimRequest],
    timings: list[RequestTiming],
    duration: float,
) -> LatencyRun:
    """Latency distributions and throughput from the per-request timings."""
    expected = total_output_len(workload)
    output_tokens = sum(t.num_output_tokens for t in timings)
    if output_tokens != expected:
        raise RuntimeError(f"{engine} generated {output_tokens} tokens, the workload asks for {expected}")
    prompt_tokens = sum(r.prompt_len for r in workload)
    ttft, tpot, e2e = request_latencies(timings)
    return LatencyRun(
        engine=engine,
        competing=competing_load,
        duration_s=duration,
        requests_per_s=len(timings) / duration,
        output_tokens_per_s=output_tokens / duration,
        total_tokens_per_s=(prompt_tokens + output_tokens) / duration,
        ttft_ms=Latency.of(ttft, keep_samples=True),
        tpot_ms=Latency.of(tpot[~np.isnan(tpot)], keep_samples=True),
        itl_ms=Latency.of(
            [(b - a) * 1e3 for t in timings for a, b in zip(t.token_times, t.token_times[1:])]
        ),  # a sample per token: too many to keep
        e2e_ms=Latency.of(e2e, keep_samples=True),
    )


def benchmark_engine(
    kwargs: dict[str, Any],
    workload: list[SimRequest],
    loads: list[str],
    temperature: float,
    record: str | None = None,
) -> tuple[list[LatencyRun], str, RecordingSummary | None]:
    """Our engine (AsyncLLM, streaming): warm up, then one pass per competing load. Returns the runs,
    the dtype the engine computed in and what the recording holds (`record`: its file, or None)."""
    from enginetui.core.engine.async_llm import AsyncLLM

    async def go() -> tuple[list[LatencyRun], str, RecordingSummary | None]:
        engine = AsyncLLM.from_engine_args(**kwargs, record=record)
        try:
            await measure(engine, warmup_workload(engine.info.vocab_size), temperature, "warmup")
            runs = []
            for load in loads:
                await engine.reset_prefix_cache()  # earlier passes must not serve this one's prompts
                address = getattr(engine.client, "events_address", None)
                with competing(load, address, engine.engine_pid) as competitor:
                    timings, duration = await measure(engine, workload, temperature, f"bench-{load}")
                    competitor.stop()
                runs.append(summarize("enginetui", load, workload, timings, duration))
                runs[-1].dashboard = competitor.cost
            return runs, engine.info.dtype, await engine.stop_recording()
        finally:
            engine.shutdown()

    return asyncio.run(go())


def benchmark_vllm(
    python: str,
    model_dir: str,
    engine: dict[str, Any],
    workload: list[SimRequest],
    cores_modes: list[str],
    loads: list[str],
    temperature: float,
) -> tuple[list[LatencyRun], str]:
    """vLLM's AsyncLLM on the same requests and arrivals: one engine per cores mode, a pass per load."""
    prompts = [prompt_token_ids(r) for r in workload]
    output_lens = [r.output_len for r in workload]
    offsets = [r.arrival for r in workload]
    runs: list[LatencyRun] = []
    version = ""
    for cores in cores_modes:
        with VLLMPeer(python, model_dir, engine, cores, use_async=True) as peer:
            version = peer.version
            for load in loads:
                with competing(load):
                    reply = peer.latency(prompts, output_lens, offsets, temperature)
                timings = [RequestTiming(**t) for t in reply["timings"]]
                runs.append(summarize(f"vllm-{cores}", load, workload, timings, reply["duration_s"]))
    return runs, version


def run(args: argparse.Namespace) -> LatencyResult:
    if not args.request_rate > 0:
        raise ValueError(f"--request-rate must be positive, got {args.request_rate}")
    spec = spec_from_args(args)
    kwargs = bench_engine_kwargs(args)
    workload = bench_workload(spec, kwargs)
    with_arrivals(workload, arrival_times(len(workload), args.request_rate, seed=spec.seed))
    loads = list(dict.fromkeys(args.competing))
    python = vllm_python(args.vllm_python) if "vllm" in args.compare else None  # fail before any engine runs
    version = None
    if python is None:
        runs, _, recording = benchmark_engine(kwargs, workload, loads, args.temperature, args.record)
    else:
        with shared_weights(kwargs) as (shared_kwargs, weights_dir):
            runs, dtype, recording = benchmark_engine(shared_kwargs, workload, loads, args.temperature, args.record)
            peer_runs, version = benchmark_vllm(
                python,
                str(weights_dir),
                vllm_engine_kwargs(shared_kwargs, dtype),
                workload,
                list(dict.fromkeys(args.vllm_cores)),
                [x for x in loads if x in VLLM_COMPETING],
                args.temperature,
            )
            runs += peer_runs
    result = LatencyResult(
        workload=spec,
        prompt_tokens=sum(r.prompt_len for r in workload),
        output_tokens=total_output_len(workload),
        request_rate=None if math.isinf(args.request_rate) else args.request_rate,
        temperature=args.temperature,
        model=kwargs["model"] or "default",
        engine_args=kwargs,
        runs=runs,
        vllm_version=version,
        recording=recording,
    )
    result.summary = report.latency_summary(result)
    return result


def main(args: argparse.Namespace) -> int:
    result = run(args)
    report.print_latency(result)
    if args.plot:
        plot.save_plot(plot.latency_figure, result, args.plot)
    report.finish(result, args)
    return 0
