"""`enginetui bench latency`: online serving latency, like `vllm bench serve`.

Requests of the workload arrive by a seeded Poisson process at --request-rate (inf: all at once)
and stream through AsyncLLM. Per request, measured on the client: TTFT (arrival to first token),
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

from core import SamplingParams
from enginetui.bench import report
from enginetui.bench.engines import bench_engine_kwargs, model_vocab_size
from enginetui.bench.workload import BenchRequest, WorkloadSpec, make_workload, spec_from_args, warmup_workload


@dataclass(slots=True)
class RequestTiming:
    """One request as the client saw it (seconds, time.perf_counter())."""

    sent: float  # when it was handed to AsyncLLM.generate
    token_times: list[float] = field(default_factory=list)  # when each output carrying new tokens arrived
    num_output_tokens: int = 0  # tokens generated
    done: float = 0.0  # when its final output arrived


@dataclass(slots=True)
class Distribution:
    """Summary of a set of latencies, in milliseconds."""

    mean: float  # mean
    median: float  # 50th percentile
    p99: float  # 99th percentile
    count: int  # samples

    @classmethod
    def of(cls, seconds: list[float]) -> "Distribution":
        if not seconds:
            return cls(math.nan, math.nan, math.nan, 0)
        ms = np.asarray(seconds) * 1e3
        return cls(float(ms.mean()), float(np.median(ms)), float(np.percentile(ms, 99)), len(ms))


@dataclass(slots=True)
class LatencyResult:
    """Everything `bench latency` measured (its --json)."""

    workload: WorkloadSpec  # how the requests were drawn
    prompt_tokens: int  # total prompt tokens of the workload
    output_tokens: int  # total output tokens generated
    request_rate: float | None  # mean arrivals per second (None: all at once)
    model: str  # the model asked for ("default": the embedded one)
    engine_args: dict[str, Any]  # the engine arguments used; our engine keeps its defaults otherwise
    duration_s: float  # first arrival to last completion
    requests_per_s: float  # completed requests / duration
    output_tokens_per_s: float  # output tokens / duration
    total_tokens_per_s: float  # (prompt + output tokens) / duration
    ttft_ms: Distribution  # time to first token
    tpot_ms: Distribution  # time per output token after the first (requests with 2+ tokens)
    itl_ms: Distribution  # inter-token latency: every gap between streamed outputs
    e2e_ms: Distribution  # end-to-end request latency
    summary: str = ""  # the one-line summary printed last


def arrival_offsets(num_requests: int, request_rate: float, seed: int) -> list[float]:
    """Seconds after the start at which each request arrives: a seeded Poisson process."""
    if math.isinf(request_rate):
        return [0.0] * num_requests
    gaps = np.random.default_rng(seed).exponential(1.0 / request_rate, size=num_requests)  # [n]
    return (np.cumsum(gaps) - gaps[0]).tolist()  # the first request arrives at once


async def _one_request(engine, request_id: str, req: BenchRequest, delay: float, t0: float) -> RequestTiming:
    await asyncio.sleep(max(0.0, t0 + delay - time.perf_counter()))
    params = SamplingParams(temperature=1.0, top_p=1.0, ignore_eos=True, max_tokens=req.output_len)
    timing = RequestTiming(sent=time.perf_counter())
    async for out in engine.generate(req.prompt_token_ids, params, request_id):
        now = time.perf_counter()
        num_tokens = len(out.outputs[0].token_ids)
        if num_tokens > timing.num_output_tokens:
            timing.token_times.append(now)
            timing.num_output_tokens = num_tokens
        if out.finished:
            timing.done = now
    return timing


async def measure(engine, workload: list[BenchRequest], request_rate: float, seed: int) -> tuple[list[RequestTiming], float]:
    """Warm up, then send the workload on its arrival schedule; the timings and the run's duration."""
    warmup = warmup_workload(engine.info.vocab_size)
    await asyncio.gather(*(_one_request(engine, f"warmup-{i}", r, 0.0, time.perf_counter())
                           for i, r in enumerate(warmup)))
    offsets = arrival_offsets(len(workload), request_rate, seed)
    t0 = time.perf_counter()
    timings = await asyncio.gather(*(_one_request(engine, f"bench-{i}", r, offsets[i], t0)
                                     for i, r in enumerate(workload)))
    return list(timings), max(t.done for t in timings) - t0


def summarize(spec: WorkloadSpec, workload: list[BenchRequest], timings: list[RequestTiming], duration: float,
              request_rate: float, kwargs: dict[str, Any]) -> LatencyResult:
    """Latency distributions and throughput from the per-request timings."""
    expected = sum(r.output_len for r in workload)
    output_tokens = sum(t.num_output_tokens for t in timings)
    if output_tokens != expected:
        raise RuntimeError(f"the engine generated {output_tokens} tokens, the workload asks for {expected}")
    prompt_tokens = sum(len(r.prompt_token_ids) for r in workload)
    return LatencyResult(
        workload=spec, prompt_tokens=prompt_tokens, output_tokens=output_tokens,
        request_rate=None if math.isinf(request_rate) else request_rate, model=kwargs["model"] or "default",
        engine_args=kwargs, duration_s=duration, requests_per_s=len(timings) / duration,
        output_tokens_per_s=output_tokens / duration, total_tokens_per_s=(prompt_tokens + output_tokens) / duration,
        ttft_ms=Distribution.of([t.token_times[0] - t.sent for t in timings]),
        tpot_ms=Distribution.of([(t.done - t.token_times[0]) / (t.num_output_tokens - 1)
                                 for t in timings if t.num_output_tokens > 1]),
        itl_ms=Distribution.of([b - a for t in timings for a, b in zip(t.token_times, t.token_times[1:])]),
        e2e_ms=Distribution.of([t.done - t.sent for t in timings]),
    )


def run(args: argparse.Namespace) -> LatencyResult:
    from core.engine.async_llm import AsyncLLM

    if not args.request_rate > 0:
        raise ValueError(f"--request-rate must be positive, got {args.request_rate}")
    spec = spec_from_args(args)
    kwargs = bench_engine_kwargs(args)
    workload = make_workload(spec, model_vocab_size(kwargs))

    async def go() -> tuple[list[RequestTiming], float]:
        engine = AsyncLLM.from_engine_args(**kwargs)
        try:
            return await measure(engine, workload, args.request_rate, spec.seed)
        finally:
            engine.shutdown()

    timings, duration = asyncio.run(go())
    result = summarize(spec, workload, timings, duration, args.request_rate, kwargs)
    result.summary = report.latency_summary(result)
    return result


def main(args: argparse.Namespace) -> int:
    result = run(args)
    report.print_latency(result)
    report.finish(result, args.json)
    return 0
