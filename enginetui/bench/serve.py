"""`enginetui bench serve`: online serving over HTTP, like `vllm bench serve`, and the server's
overhead against LLM.generate on the same workload.

The benchmark starts `enginetui serve` with the engine flags given (or uses --base-url), sends
the workload to /v1/completions as streamed requests (token-id prompts, ignore_eos, max_tokens =
the request's output length) arriving by a seeded Poisson process at --request-rate, and
measures on the client, per request: TTFT (sent to first token), TPOT (mean time per output
token after the first), ITL (every gap between chunks carrying tokens), end-to-end latency; and
throughput over the run. With --compare generate it also runs the workload all at once
--repeats times through a server and --repeats times through LLM.generate (offline, EngineCore in
its own process as well), taking turns (server, generate, generate, server, ...: a machine whose
speed drifts weighs on both alike), each pass in an engine started for it and stopped after (so
no idle engine sits beside the other: on 2 cores even its few wakes slow a run); the best passes'
throughput ratio is what HTTP, the asyncio front end and streaming cost, and each side's spread
is printed.
--goodput adds the requests per second that met every SLO (goodput.py); --record has the server
record its step events. --compare vllm-server is serve_vs_vllm.py (the CLI dispatches there).
"""

import argparse
import asyncio
import json
import math
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np

from enginetui.bench import report
from enginetui.bench.engines import bench_engine_kwargs, bench_workload, model_vocab_size
from enginetui.bench.goodput import goodput, request_slos
from enginetui.bench.latency import LatencyRun, RequestTiming, arrival_offsets, summarize
from enginetui.bench.stream_client import stream_events
from enginetui.bench.workload import BenchRequest, WorkloadSpec, spec_from_args, warmup_workload
from enginetui.flags.engine import ENGINE_DEFAULTS, ENGINE_FLAGS

DEFAULT_TIMEOUT_S = 1800.0  # most seconds one pass of the workload may take


@dataclass(slots=True)
class OverheadResult:
    """The workload all at once: through the server vs through LLM.generate."""

    http_s: list[float]  # duration of each pass through the server (first send to last token), in order
    generate_s: list[float]  # duration of each LLM.generate pass (call to return), in order
    output_tokens: int  # output tokens of one pass
    http_tok_s: float  # best pass through the server, output tokens / s
    generate_tok_s: float  # best LLM.generate pass, output tokens / s
    ratio: float  # http_tok_s / generate_tok_s (1.0: the server costs nothing)


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
    overhead: OverheadResult | None  # with --compare generate
    slos_ms: dict[str, float] = field(default_factory=dict)  # the --goodput SLOs (ttft, tpot, e2e), milliseconds
    goodput: float | None = None  # requests per second that met every SLO (None: no --goodput)
    record: str | None = None  # the file the server recorded its step events to (--record)
    summary: str = ""  # the one-line summary printed last


async def send(url: str, headers: dict[str, str], model: str, req: BenchRequest, delay: float,
               t0: float) -> RequestTiming:
    """One streamed request, sent `delay` s after `t0`; its timings as the client saw them."""
    await asyncio.sleep(max(0.0, t0 + delay - time.perf_counter()))
    body = {"model": model, "prompt": req.prompt_token_ids, "max_tokens": req.output_len, "ignore_eos": True,
            "temperature": 1.0, "top_p": 1.0, "stream": True, "return_token_ids": True}
    timing = RequestTiming(sent=time.perf_counter())

    def on_data(data: bytes) -> None:
        if not data.startswith(b"{"):
            return
        new = sum(len(c.get("token_ids") or []) for c in json.loads(data)["choices"])
        if new:
            timing.token_times.append(time.perf_counter())
            timing.num_output_tokens += new

    await stream_events(url, "/v1/completions", body, on_data, headers)
    timing.done = time.perf_counter()
    return timing


async def run_workload(url: str, api_key: str | None, workload: list[BenchRequest], warmup: list[BenchRequest],
                       rate: float, seed: int, timeout_s: float = DEFAULT_TIMEOUT_S) -> tuple[list[RequestTiming], float]:
    """Warm the server up, then send the workload on its arrival schedule; timings and duration.
    A pass (warm-up included) that runs past `timeout_s` raises TimeoutError."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    async def go() -> tuple[list[RequestTiming], float]:
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=None) as client:
            model = (await client.get("/v1/models")).raise_for_status().json()["data"][0]["id"]
        await asyncio.gather(*(send(url, headers, model, r, 0.0, time.perf_counter()) for r in warmup))
        offsets = arrival_offsets(len(workload), rate, seed)
        t0 = time.perf_counter()
        timings = await asyncio.gather(*(send(url, headers, model, r, offsets[i], t0) for i, r in enumerate(workload)))
        return list(timings), max(t.done for t in timings) - t0

    try:
        return await asyncio.wait_for(go(), timeout_s)
    except TimeoutError:
        raise TimeoutError(f"a pass of the workload against {url} ran past --timeout-s {timeout_s:g}") from None


def generate_pass(llm, workload: list[BenchRequest]) -> float:
    """LLM.generate on the workload, all at once; its duration."""
    from enginetui.core import SamplingParams

    params = [SamplingParams(temperature=1.0, top_p=1.0, ignore_eos=True, max_tokens=r.output_len) for r in workload]
    t0 = time.perf_counter()
    outputs = llm.generate([r.prompt_token_ids for r in workload], params, use_tqdm=False)
    duration = time.perf_counter() - t0
    if sum(len(o.outputs[0].token_ids) for o in outputs) != sum(r.output_len for r in workload):
        raise RuntimeError("LLM.generate did not generate the workload's tokens")
    return duration


def serve_flags(kwargs: dict[str, Any]) -> list[str]:
    """`enginetui serve` flags for these engine keyword arguments (vLLM's names)."""
    flags = []
    for spec in ENGINE_FLAGS:
        value = kwargs.get(spec.dest)
        if value is None:
            continue
        if spec.kwargs.get("action") is argparse.BooleanOptionalAction:
            flags.append(spec.flag if value else f"--no-{spec.flag[2:]}")
        else:
            flags += [spec.flag, str(value)]
    if kwargs.get("skip_tokenizer_init"):
        flags.append("--skip-tokenizer-init")
    return flags


def run(args: argparse.Namespace) -> ServeResult:
    from enginetui.serve.process import ServeProcess

    if len(args.request_rate) > 1:
        raise ValueError("several --request-rate values are for --compare vllm-server; give one")
    rate = args.request_rate[0]
    if args.step_times:
        raise ValueError("--step-times compares the steps of two servers: it needs --compare vllm-server")
    if args.base_url and (args.compare or args.record):
        raise ValueError(f"{'--compare generate' if args.compare else '--record'} needs the server this benchmark "
                         "starts: leave out --base-url")
    slos_ms = request_slos(args.goodput)
    spec = spec_from_args(args)
    kwargs = bench_engine_kwargs(args)
    vocab_size = model_vocab_size(kwargs)
    workload, warmup = bench_workload(spec, kwargs), warmup_workload(vocab_size)
    server = None if args.base_url else ServeProcess(*serve_flags(kwargs),
                                                     *(["--record", args.record] if args.record else []))
    url = args.base_url or server.url
    overhead = None
    try:
        timings, duration = asyncio.run(run_workload(url, args.api_key, workload, warmup, rate, spec.seed,
                                                     args.timeout_s))
    finally:
        if server is not None:
            server.stop()
    if args.compare:
        overhead = _overhead(kwargs, workload, warmup, args.repeats, spec.seed, args.timeout_s)
    result = ServeResult(
        workload=spec, prompt_tokens=sum(len(r.prompt_token_ids) for r in workload),
        output_tokens=sum(r.output_len for r in workload), request_rate=None if math.isinf(rate) else rate,
        model=kwargs["model"] or "default", engine_args={} if args.base_url else kwargs, url=url,
        run=summarize("enginetui-http", "none", workload, timings, duration), overhead=overhead,
        slos_ms=slos_ms, goodput=goodput(timings, duration, slos_ms), record=args.record)
    result.summary = serve_summary(result)
    return result


def generate_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """LLM's arguments for the engine the server ran: its step budget too (LLM alone would take
    vLLM's offline budget on CPU, the server keeps the online one)."""
    budget = kwargs.get("max_num_batched_tokens") or ENGINE_DEFAULTS["max_num_batched_tokens"]
    return {**kwargs, "max_num_batched_tokens": budget}


def _overhead(kwargs: dict[str, Any], workload: list[BenchRequest], warmup: list[BenchRequest], repeats: int,
              seed: int, timeout_s: float) -> OverheadResult:
    """The workload all at once through a server and through LLM.generate, `repeats` passes each,
    taking turns; every pass alone on the machine, in an engine started for it."""
    http_s, generate_s = [], []
    for i in range(repeats):
        for side in ("server", "generate") if i % 2 == 0 else ("generate", "server"):
            if side == "server":
                http_s.append(_server_pass(kwargs, workload, warmup, seed, timeout_s))
            else:
                generate_s.append(_generate_pass_alone(kwargs, workload, warmup))
    tokens = sum(r.output_len for r in workload)
    http_tok_s, generate_tok_s = tokens / min(http_s), tokens / min(generate_s)
    return OverheadResult(http_s=http_s, generate_s=generate_s, output_tokens=tokens, http_tok_s=http_tok_s,
                          generate_tok_s=generate_tok_s, ratio=http_tok_s / generate_tok_s)


def _server_pass(kwargs: dict[str, Any], workload: list[BenchRequest], warmup: list[BenchRequest], seed: int,
                 timeout_s: float) -> float:
    """Start `enginetui serve`, warm it up, send the workload all at once, stop it; the pass's duration."""
    from enginetui.serve.process import ServeProcess

    server = ServeProcess(*serve_flags(kwargs))
    try:
        return asyncio.run(run_workload(server.url, None, workload, warmup, math.inf, seed, timeout_s))[1]
    finally:
        server.stop()


def _generate_pass_alone(kwargs: dict[str, Any], workload: list[BenchRequest], warmup: list[BenchRequest]) -> float:
    """Start an LLM with the server's engine flags, warm it up, run the workload, shut it down; the duration."""
    from enginetui.core import LLM

    with LLM(**generate_kwargs(kwargs)) as llm:
        generate_pass(llm, warmup)
        return generate_pass(llm, workload)


def print_serve(result: ServeResult) -> None:
    r = result.run
    print(report.workload_line(result))
    rate = "all at once" if result.request_rate is None else f"Poisson arrivals at {result.request_rate:g} req/s"
    print(f"server {result.url} ({result.model}): streamed /v1/completions, {rate}; engine args {result.engine_args}")
    print(f"duration {r.duration_s:.2f} s: {r.requests_per_s:.2f} req/s, {r.output_tokens_per_s:.1f} output tok/s, "
          f"{r.total_tokens_per_s:.1f} total tok/s")
    rows = [[name, d.mean, d.median, d.p99, d.count] for name, d in
            (("TTFT", r.ttft_ms), ("TPOT", r.tpot_ms), ("ITL", r.itl_ms), ("E2E", r.e2e_ms))]
    print(report.table(["ms", "mean", "median", "p99", "samples"], rows))
    if result.goodput is not None:
        slos = ", ".join(f"{k} <= {v:g} ms" for k, v in result.slos_ms.items())
        print(f"goodput {result.goodput:.2f} req/s ({slos})")
    if result.record:
        print(f"the server's step events were recorded to {result.record}")
    o = result.overhead
    if o is not None:
        print(f"all at once, {o.output_tokens} output tokens, {len(o.http_s)} passes each, taking turns, "
              f"each in an engine of its own (the best counts):")
        rows = [["server (HTTP, streamed)", *_spread(o.http_s), o.http_tok_s],
                ["LLM.generate", *_spread(o.generate_s), o.generate_tok_s]]
        print(report.table(["", "best s", "median s", "worst s", "output tok/s"], rows))
        print(f"server / LLM.generate throughput: {o.ratio:.3f}x")


def _spread(durations: list[float]) -> list[float]:
    return [min(durations), float(np.median(durations)), max(durations)]


def serve_summary(result: ServeResult) -> str:
    r = result.run
    rate = "inf" if result.request_rate is None else f"{result.request_rate:g}"
    line = (f"serve {result.workload.name} @ {rate} req/s: TTFT median {r.ttft_ms.median:.1f} ms "
            f"(p99 {r.ttft_ms.p99:.1f}), TPOT median {r.tpot_ms.median:.1f} ms, ITL median {r.itl_ms.median:.1f} ms, "
            f"E2E median {r.e2e_ms.median:.1f} ms | {r.requests_per_s:.2f} req/s, {r.output_tokens_per_s:.1f} output tok/s")
    if result.overhead is not None:
        o = result.overhead
        line += (f" | all at once: server {o.http_tok_s:.1f} vs LLM.generate {o.generate_tok_s:.1f} output tok/s "
                 f"({o.ratio:.3f}x)")
    return line


def main(args: argparse.Namespace) -> int:
    result = run(args)
    print_serve(result)
    report.finish(result, args.json)
    return 0
