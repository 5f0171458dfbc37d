"""`enginetui bench serve`: online serving over HTTP, like `vllm bench serve`, and the server's
overhead against LLM.generate on the same workload.

The benchmark starts `enginetui serve` with the engine flags given (or uses --base-url), sends
the workload to /v1/completions as streamed requests (serve_load.py) arriving by a seeded Poisson
process at --request-rate, or a trace's requests at the trace's arrivals (--trace / --dataset: the very
requests `enginetui simulate` serves for the same flags), or to a router in front of servers (--router-url: prompts
as text, router_prompts.py), and measures on the client, per request: TTFT (sent to first token),
TPOT (mean time per output token after the first), ITL (every gap between chunks carrying tokens),
end-to-end latency; and throughput over the run. --compare generate adds the server's cost against
LLM.generate on the workload all at once, --compare vllm-generate the same for vLLM beside ours
(serve_overhead.py). --goodput adds the requests per second that met every SLO (enginetui/latency_figures.py);
--record has the server record its step events. --compare vllm-server is serve_vs_vllm.py (the CLI
dispatches there).
"""

import argparse
import asyncio
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from enginetui.bench import report, serve_overhead
from enginetui.bench.engines import bench_engine_kwargs, bench_workload, model_vocab_size
from enginetui.bench.latency import LatencyRun, request_latencies, summarize
from enginetui.bench.router_prompts import model_words
from enginetui.bench.serve_load import run_workload, serve_flags
from enginetui.bench.serve_overhead import OverheadResult
from enginetui.bench.workload import (
    SHAREGPT_FLAGS,
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
class ServeResult:
    """Everything `bench serve` measured (its --json)."""

    workload: WorkloadSpec  # how the requests were drawn
    prompt_tokens: int  # total prompt tokens of the workload
    output_tokens: int  # total output tokens generated
    request_rate: float | None  # mean arrivals per second (None: all at once)
    model: str  # the model asked for ("default": the embedded one)
    engine_args: dict[str, Any]  # the engine arguments of the server started (empty with --base-url)
    url: str  # the server benchmarked
    run: LatencyRun  # the Poisson run over HTTP, as the client saw it
    overhead: OverheadResult | None  # with --compare generate or vllm-generate
    vllm_overhead: OverheadResult | None = None  # with --compare vllm-generate: vLLM's server against its LLM.generate
    slos_ms: dict[str, float] = field(default_factory=dict)  # the --goodput SLOs (ttft, tpot, e2e), milliseconds
    goodput: float | None = None  # requests per second that met every SLO (None: no --goodput)
    record: str | None = None  # the file the server recorded its step events to (--record)
    trace: str | None = None  # the trace served (its name, window and time scale); None: a drawn workload
    trace_notes: list[str] = field(default_factory=list)  # what was done to the trace's requests (clipped, skipped)
    summary: str = ""  # the one-line summary printed last


def run(args: argparse.Namespace) -> ServeResult:
    from enginetui.serve.process import ServeProcess

    if len(args.request_rate) > 1:
        raise ValueError("several --request-rate values are for --compare vllm-server; give one")
    rate = args.request_rate[0]
    if args.step_times:
        raise ValueError("--step-times compares the steps of two servers: it needs --compare vllm-server")
    given_url = "--base-url" if args.base_url else "--router-url" if args.router_url else None
    if args.base_url and args.router_url:
        raise ValueError("--base-url and --router-url both name the server to benchmark: give one")
    if given_url and (args.compare or args.record):
        raise ValueError(
            f"{f'--compare {args.compare}' if args.compare else '--record'} needs the server this "
            f"benchmark starts: leave out {given_url}"
        )
    python = vllm_python(args.vllm_python) if args.compare == "vllm-generate" else None  # fail before any start
    check_trace_args(args)
    slos_ms = parse_slos(args.goodput)
    kwargs = bench_engine_kwargs(args)
    vocab_size = model_vocab_size(kwargs)
    notes: list[str] = []
    if uses_trace(args):
        workload = trace_to_send(args, kwargs, vocab_size, notes)
        spec = trace_spec(args, workload)
        drawn = None
    else:
        spec = spec_from_args(args)
        drawn = bench_workload(spec, kwargs)
        workload = with_arrivals(drawn, arrival_times(len(drawn), rate, seed=spec.seed))
    warmup = warmup_workload(vocab_size)
    words = model_words(kwargs) if args.router_url else None
    server = (
        None if given_url else ServeProcess(*serve_flags(kwargs), *(["--record", args.record] if args.record else []))
    )
    url = server.url if server is not None else args.base_url or args.router_url
    try:
        timings, duration = asyncio.run(run_workload(url, args.api_key, workload, warmup, args.timeout_s, words))
    finally:
        if server is not None:
            server.stop()
    overhead = vllm_overhead = None
    if args.compare == "generate":
        assert drawn is not None  # a trace refuses --compare (trace_to_send)
        overhead = serve_overhead.overhead(
            kwargs, drawn, warmup_workload(vocab_size), args.repeats, spec.seed, args.timeout_s
        )
    elif args.compare == "vllm-generate":
        assert python is not None and drawn is not None  # found above for vllm-generate; a trace refuses --compare
        report.quiet_transformers()
        overhead, vllm_overhead = serve_overhead.overhead_beside_vllm(
            kwargs, drawn, warmup_workload(vocab_size), args.repeats, spec.seed, args.timeout_s, python
        )
    result = ServeResult(
        workload=spec,
        prompt_tokens=sum(r.prompt_len for r in workload),
        output_tokens=total_output_len(workload),
        request_rate=None if math.isinf(rate) or uses_trace(args) else rate,
        model=kwargs["model"] or "default",
        engine_args={} if given_url else kwargs,
        url=url,
        run=summarize("enginetui-http", "none", workload, timings, duration),
        overhead=overhead,
        vllm_overhead=vllm_overhead,
        slos_ms=slos_ms,
        goodput=goodput(slos_ms, duration, *request_latencies(timings)),
        record=args.record,
        trace=spec.name if uses_trace(args) else None,
        trace_notes=notes,
    )
    result.summary = serve_summary(result)
    return result


def trace_to_send(
    args: argparse.Namespace, kwargs: dict[str, Any], vocab_size: int, notes: list[str]
) -> list[SimRequest]:
    """The trace's requests, as `enginetui simulate` serves them for the same flags and max_model_len."""
    from enginetui.core.config import EngineConfig
    from enginetui.core.models.loader import load_hf_config
    from enginetui.simulate.traces import trace_requests
    from enginetui.simulate.workload import TOKEN_RANGE

    drawn = [
        f"--{name.replace('_', '-')}"
        for name in (*SHAREGPT_FLAGS, "num_prompts", "workload_seed")
        if getattr(args, name) is not None
    ]
    drawn += ["--range-ratio"] if args.range_ratio else []
    drawn += ["--request-rate"] if args.request_rate != [math.inf] else []
    drawn += [f"--compare {args.compare}"] if args.compare else []
    if drawn:
        raise ValueError(f"a trace brings its own requests and arrivals: leave out {' '.join(drawn)}")
    if vocab_size < TOKEN_RANGE[1]:
        raise ValueError(
            f"a trace's prompts use token ids up to {TOKEN_RANGE[1] - 1}; the model's vocabulary has {vocab_size}"
        )
    max_model_len = kwargs.get("max_model_len") or load_hf_config(EngineConfig(**kwargs))[0].max_position_embeddings
    return trace_requests(args, max_model_len, notes)


def trace_spec(args: argparse.Namespace, workload: list[SimRequest]) -> WorkloadSpec:
    """The trace's requests described as a workload (the record's name, counts and length ranges)."""
    name = args.dataset if args.dataset else Path(args.trace).name
    name += f" {args.trace_window}" if args.trace_window else ""
    name += f" x{args.time_scale:g}" if args.time_scale != 1.0 else ""
    inputs, outputs = [r.prompt_len for r in workload], [r.output_len for r in workload]
    return WorkloadSpec(name, len(workload), min(inputs), max(inputs), min(outputs), max(outputs))


def print_serve(result: ServeResult) -> None:
    r = result.run
    if result.trace is None:
        print(report.workload_line(result))
        rate = "all at once" if result.request_rate is None else f"Poisson arrivals at {result.request_rate:g} req/s"
    else:
        w = result.workload
        print(
            f"trace {w.name}: {w.num_prompts} requests, input {w.min_input_len}-{w.max_input_len}, output "
            f"{w.min_output_len}-{w.max_output_len} ({result.prompt_tokens} prompt + {result.output_tokens} output tokens)"
        )
        for note in result.trace_notes:
            print(f"  {note}")
        rate = "the trace's arrivals"
    engine = (
        report.engine_settings(result.engine_args) if result.engine_args else "its engine flags its own (--base-url)"
    )
    print(f"server {result.url} ({result.model}): streamed /v1/completions, {rate}; {engine}")
    print(
        f"duration {r.duration_s:.2f} s: {r.requests_per_s:.2f} req/s, {r.output_tokens_per_s:.1f} output tok/s, "
        f"{r.total_tokens_per_s:.1f} total tok/s"
    )
    rows = [
        [name, d.mean, d.p50, d.p99, d.count]
        for name, d in (("TTFT", r.ttft_ms), ("TPOT", r.tpot_ms), ("ITL", r.itl_ms), ("E2E", r.e2e_ms))
    ]
    print(report.table(["ms", "mean", "median", "p99", "samples"], rows))
    if result.goodput is not None:
        slos = ", ".join(f"{k} <= {v:g} ms" for k, v in result.slos_ms.items())
        print(f"goodput {result.goodput:.2f} req/s ({slos})")
    if result.record:
        print(f"the server's step events were recorded to {result.record}")
    if result.overhead is not None:
        serve_overhead.print_overhead(result.overhead, result.vllm_overhead)


def serve_summary(result: ServeResult) -> str:
    r = result.run
    rate = "inf" if result.request_rate is None else f"{result.request_rate:g}"
    arrivals = "trace arrivals" if result.trace else f"{rate} req/s"
    line = (
        f"serve {result.workload.name} @ {arrivals}: TTFT median {r.ttft_ms.p50:.1f} ms "
        f"(p99 {r.ttft_ms.p99:.1f}), TPOT median {r.tpot_ms.p50:.1f} ms, ITL median {r.itl_ms.p50:.1f} ms, "
        f"E2E median {r.e2e_ms.p50:.1f} ms | {r.requests_per_s:.2f} req/s, {r.output_tokens_per_s:.1f} output tok/s"
    )
    if result.overhead is not None:
        line += " | " + serve_overhead.summary(result.overhead, result.vllm_overhead)
    return line


def main(args: argparse.Namespace) -> int:
    result = run(args)
    print_serve(result)
    report.finish(result, args)
    return 0
