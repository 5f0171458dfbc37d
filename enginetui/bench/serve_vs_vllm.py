"""`enginetui bench serve --compare vllm-server`: this engine's server against vLLM's OpenAI server.

Both serve the same weights (one model directory: with --load-format dummy, random weights saved
once under the engine seed) and get the same requests (token-id prompts, ignore_eos, max_tokens =
the request's output length, streamed from /v1/completions) on the same seeded Poisson arrivals, at
each --request-rate in turn. `enginetui serve` and vLLM's api_server (vLLM's interpreter, the model
on every core, the dtype our engine ran in, prefix caching off on both so a pass never finds the
previous pass's prompts cached) are both up, and take turns: at each rate, --repeats passes each,
interleaved ours, vLLM's, vLLM's, ours, ... so a machine whose speed drifts from minute to minute
(a shared 2-core machine moves 10-25%) drifts for both alike. An idle server takes about 1% of a
core. Both listen on 127.0.0.1 only; a pass that runs past --timeout-s fails the benchmark, and the
servers are stopped whatever happens. Per rate and server: TTFT, TPOT, ITL (p50, p99), end-to-end
latency, request and output throughput and goodput under the --goodput SLOs, each the median over
the passes (with their range), and each figure ours / vLLM's. --step-times adds the model time of
every engine step of both servers, per step kind (step_kinds.py).
"""

import argparse
import asyncio
import math
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import median
from typing import Any

import httpx
import psutil

from enginetui.bench import report
from enginetui.bench.engines import bench_engine_kwargs, bench_workload, model_vocab_size, shared_weights
from enginetui.bench.frozen import frozen
from enginetui.bench.latency import LatencyRun, request_latencies, summarize
from enginetui.bench.process_cpu import cpu_seconds
from enginetui.bench.serve_load import run_workload, serve_flags
from enginetui.bench.step_kinds import StepComparison, compare_steps, ours_steps, vllm_steps
from enginetui.bench.vllm_peer import start_peer_server, vllm_engine_kwargs
from enginetui.bench.workload import (
    WorkloadSpec,
    spec_from_args,
    total_output_len,
    warmup_workload,
)
from enginetui.flags.traces import check_trace_args, uses_trace
from enginetui.latency_figures import goodput, parse_slos
from enginetui.simulate.arrivals import arrival_times, with_arrivals
from enginetui.simulate.workload import SimRequest
from enginetui.vllm_launch import vllm_python


@dataclass(slots=True)
class ServePass:
    """One server's pass over the workload at one request rate."""

    run: LatencyRun  # the pass as the client saw it
    goodput: float | None  # requests per second that met every SLO (None: no --goodput)
    # the server process's own CPU time (its EngineCore child's left out) per output token, microseconds:
    # HTTP, JSON, detokenizing and metrics, taken from the model's threads on a small machine
    front_end_us_per_token: float | None = None


# (label, how to read it from a pass, higher is better)
FIGURES: tuple[tuple[str, Callable[[ServePass], float | None], bool], ...] = (
    ("output tok/s", lambda p: p.run.output_tokens_per_s, True),
    ("requests/s", lambda p: p.run.requests_per_s, True),
    ("goodput req/s", lambda p: p.goodput, True),
    ("TTFT p50 ms", lambda p: p.run.ttft_ms.p50, False),
    ("TTFT p99 ms", lambda p: p.run.ttft_ms.p99, False),
    ("TPOT p50 ms", lambda p: p.run.tpot_ms.p50, False),
    ("TPOT p99 ms", lambda p: p.run.tpot_ms.p99, False),
    ("ITL p50 ms", lambda p: p.run.itl_ms.p50, False),
    ("ITL p99 ms", lambda p: p.run.itl_ms.p99, False),
    ("E2E p50 ms", lambda p: p.run.e2e_ms.p50, False),
    ("front-end CPU us/tok", lambda p: p.front_end_us_per_token, False),
)


@dataclass(slots=True)
class RatePoint:
    """One server's passes over the workload at one request rate."""

    request_rate: float | None  # mean arrivals per second (None: all at once)
    passes: list[ServePass]  # in the order run

    def figure(self, read: Callable[[ServePass], float | None]) -> float | None:
        """A figure's median over the passes (None: no pass has it)."""
        values = _values(self, read)
        return median(values) if values else None

    def spread(self, read: Callable[[ServePass], float | None]) -> tuple[float, float] | None:
        """A figure's lowest and highest pass (None: no pass has it)."""
        values = _values(self, read)
        return (min(values), max(values)) if values else None


def _values(point: RatePoint, read: Callable[[ServePass], float | None]) -> list[float]:
    return [v for p in point.passes if (v := read(p)) is not None and not math.isnan(v)]


@dataclass(slots=True)
class ServeVsVLLMResult:
    """Everything `bench serve --compare vllm-server` measured (its --json)."""

    workload: WorkloadSpec  # how the requests were drawn
    prompt_tokens: int  # total prompt tokens of the workload
    output_tokens: int  # total output tokens of one pass
    request_rates: list[float | None]  # the rates, in the order run (None: all at once)
    slos_ms: dict[str, float]  # the goodput SLOs (ttft, tpot, e2e), milliseconds
    model: str  # the model asked for ("default": the embedded one)
    engine_args: dict[str, Any]  # our server's engine arguments, as given (the weights then shared)
    vllm_args: dict[str, Any]  # vLLM's engine arguments besides the model (its defaults otherwise)
    vllm_version: str  # vLLM's version, from its /version
    repeats: int  # passes of each server at each rate
    ours: list[RatePoint]  # our server, one point per rate
    vllm: list[RatePoint]  # vLLM's server, one point per rate
    ratios: list[dict[str, float | None]] = field(default_factory=list)  # per rate: figure -> ours / vLLM's (medians)
    steps: StepComparison | None = None  # model time per step kind, both servers (None: no --step-times)
    summary: str = ""  # the one-line summary printed last


def ratio(ours: float | None, theirs: float | None) -> float | None:
    if ours is None or theirs is None or not theirs or math.isnan(ours) or math.isnan(theirs):
        return None
    return ours / theirs


def serve_pass(
    server_url: str,
    label: str,
    workload: list[SimRequest],
    warmup: list[SimRequest],
    rate: float,
    seed: int,
    slos_ms: dict[str, float],
    timeout_s: float,
    server_pid: int,
) -> ServePass:
    """One pass of the workload at one rate against a running server (its front-end: process `server_pid`;
    its CPU per token counts the pass's few warm-up requests too)."""
    front_end = psutil.Process(server_pid)  # this process only: its EngineCore child is not counted
    cpu_before = cpu_seconds(front_end)
    timings, duration = asyncio.run(
        run_workload(
            server_url,
            None,
            with_arrivals(workload, arrival_times(len(workload), rate, seed=seed)),
            warmup,
            timeout_s,
        )
    )
    cpu_s = cpu_seconds(front_end) - cpu_before
    tokens = total_output_len(workload)  # every request streams all of them (ignore_eos)
    return ServePass(
        summarize(label, "none", workload, timings, duration),
        goodput(slos_ms, duration, *request_latencies(timings)),
        cpu_s / tokens * 1e6 if tokens else None,
    )


def turns(repeats: int) -> list[int]:
    """Which server runs each pass at one rate (0 ours, 1 vLLM's): ABBA order, so a steady drift of the
    machine's speed weighs on both alike."""
    return [0 if i % 4 in (0, 3) else 1 for i in range(2 * repeats)]


def run(args: argparse.Namespace) -> ServeVsVLLMResult:
    from enginetui.serve.process import ServeProcess

    rates = list(args.request_rate)
    if uses_trace(args):
        raise ValueError("--compare vllm-server sends a drawn workload at each --request-rate: leave out the trace")
    check_trace_args(args)
    if args.base_url or args.router_url:
        raise ValueError(
            f"--compare vllm-server starts both servers itself: leave out {'--base-url' if args.base_url else '--router-url'}"
        )
    slos_ms = parse_slos(args.goodput)
    spec = spec_from_args(args)
    kwargs = bench_engine_kwargs(args)
    if kwargs.get("enable_prefix_caching"):
        raise ValueError(
            "--compare vllm-server runs every rate on one server: with prefix caching a rate would "
            "find the previous rate's prompts cached; leave --enable-prefix-caching out"
        )
    python = vllm_python(args.vllm_python)  # fail before any server starts
    vocab_size = model_vocab_size(kwargs)
    workload, warmup = bench_workload(spec, kwargs), warmup_workload(vocab_size)
    report.quiet_transformers()
    with shared_weights(kwargs) as (shared, weights_dir), tempfile.TemporaryDirectory() as scratch:
        record = args.record or (f"{scratch}/ours.etrec" if args.step_times else None)
        server = ServeProcess(*serve_flags(shared), *(["--record", record] if record else []))
        vllm_log = ""
        try:
            info = httpx.get(f"{server.url}/v1/enginetui/info", timeout=30.0).raise_for_status().json()
            dtype = info["engine"]["dtype"]
            engine = {**vllm_engine_kwargs(shared, dtype), "enable_prefix_caching": False}
            if shared.get("skip_tokenizer_init"):
                engine["skip_tokenizer_init"] = True
            elif shared.get("tokenizer"):
                engine["tokenizer"] = shared["tokenizer"]
            with start_peer_server(python, str(weights_dir), engine, log_steps=args.step_times) as vllm:
                version = httpx.get(f"{vllm.url}/version", timeout=30.0).raise_for_status().json()["version"]
                sides = ((server.url, "enginetui-serve", server.proc.pid), (vllm.url, "vllm-serve", vllm.proc.pid))
                ours, theirs = [], []
                for rate in rates:
                    passes: tuple[list[ServePass], list[ServePass]] = ([], [])
                    for side in turns(args.repeats):
                        url, label, pid = sides[side]
                        with frozen(*([vllm.proc] if side == 0 else [])):  # an idle vLLM wakes ~1,300 times a second
                            passes[side].append(
                                serve_pass(url, label, workload, warmup, rate, spec.seed, slos_ms, args.timeout_s, pid)
                            )
                    point_rate = None if math.isinf(rate) else rate
                    ours.append(RatePoint(point_rate, passes[0]))
                    theirs.append(RatePoint(point_rate, passes[1]))
                vllm_log = vllm.log_text()
        finally:
            server.stop()
        steps = compare_steps(ours_steps(record), vllm_steps(vllm_log)) if args.step_times and record else None
    result = ServeVsVLLMResult(
        workload=spec,
        prompt_tokens=sum(r.prompt_len for r in workload),
        output_tokens=total_output_len(workload),
        request_rates=[p.request_rate for p in ours],
        slos_ms=slos_ms,
        model=kwargs["model"] or "default",
        engine_args=kwargs,
        vllm_args=engine,
        vllm_version=version,
        repeats=args.repeats,
        ours=ours,
        vllm=theirs,
        ratios=[
            {label: ratio(a.figure(read), b.figure(read)) for label, read, _ in FIGURES} for a, b in zip(ours, theirs)
        ],
        steps=steps,
    )
    result.summary = summary(result)
    return result


def _rate_text(rate: float | None) -> str:
    return "inf" if rate is None else f"{rate:g}"


def print_result(result: ServeVsVLLMResult) -> None:
    print(report.workload_line(result))
    slos = ", ".join(f"{k} <= {v:g} ms" for k, v in result.slos_ms.items()) or "none (--goodput NAME:MS ...)"
    print(
        f"streamed /v1/completions, seeded Poisson arrivals; enginetui serve {result.engine_args} against vLLM "
        f"{result.vllm_version} api_server {result.vllm_args}; goodput SLOs: {slos}"
    )
    for rate, a, b, ratios in zip(result.request_rates, result.ours, result.vllm, result.ratios):
        arrivals = "all at once" if rate is None else f"request rate {rate:g} req/s"
        print(
            f"\n{arrivals}, median of {result.repeats} passes each, interleaved (ours "
            f"{_range(a.spread(_duration), 's')}, vLLM {_range(b.spread(_duration), 's')}):"
        )
        rows = [
            [
                label,
                a.figure(read),
                _range(a.spread(read)),
                b.figure(read),
                _range(b.spread(read)),
                ratios[label],
                "higher" if higher else "lower",
            ]
            for label, read, higher in FIGURES
        ]
        print(report.table(["", "enginetui", "passes", "vLLM", "passes", "ours/vLLM", "better"], rows))
    if result.steps is not None:
        print_steps(result.steps)


def print_steps(steps: StepComparison) -> None:
    print(
        "\nmodel time per engine step, every pass and the warm-ups (ours: the model runner's time of each "
        "recorded step; vLLM: its iteration elapsed time), medians in ms:"
    )
    rows = [[r.kind, r.ours_steps, r.ours_ms, r.vllm_steps, r.vllm_ms, r.ratio] for r in steps.rows]
    print(report.table(["step kind", "our steps", "ours ms", "vLLM steps", "vLLM ms", "ours/vLLM"], rows))
    total = ratio(steps.ours_total_ms, steps.vllm_total_ms)
    print(
        f"all steps: ours {steps.ours_steps} in {steps.ours_total_ms / 1e3:.1f} s, vLLM {steps.vllm_steps} in "
        f"{steps.vllm_total_ms / 1e3:.1f} s of model time (ours/vLLM {_x(total)})"
    )


def summary(result: ServeVsVLLMResult) -> str:
    parts = []
    for rate, ratios in zip(result.request_rates, result.ratios):
        out, ttft = ratios["output tok/s"], ratios["TTFT p50 ms"]
        parts.append(
            f"@{_rate_text(rate)}: output tok/s {_x(out)}, TTFT p50 {_x(ttft)}, TPOT p50 "
            f"{_x(ratios['TPOT p50 ms'])}" + (f", goodput {_x(ratios['goodput req/s'])}" if result.slos_ms else "")
        )
    return f"serve {result.workload.name} vs vLLM {result.vllm_version} server, ours/vLLM " + "; ".join(parts)


def _duration(p: ServePass) -> float:
    return p.run.duration_s


def _range(spread: tuple[float, float] | None, unit: str = "") -> str:
    """A figure's passes as "low-high" (one value when they are equal)."""
    if spread is None:
        return "-"
    low, high = (f"{v:.1f}" if v >= 10 else f"{v:.3g}" for v in spread)
    return (low if low == high else f"{low}-{high}") + (f" {unit}" if unit else "")


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def main(args: argparse.Namespace) -> int:
    result = run(args)
    print_result(result)
    report.finish(result, args)
    return 0
