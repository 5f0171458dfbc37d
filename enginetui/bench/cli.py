"""The `enginetui bench {throughput,latency,serve,profile,ops,roofline,scheduling}` subcommands: their flags, and dispatch."""

import argparse
import datetime
import importlib
import os
import sys

from enginetui.bench.competing import COMPETING_MODES
from enginetui.bench.recording import add_record_arg
from enginetui.bench.saved_result import RESULT_DIR, check_destinations
from enginetui.bench.workload import add_workload_args
from enginetui.core.config import OFFLINE_CPU_MAX_NUM_BATCHED_TOKENS
from enginetui.flags.engine import ENGINE_DEFAULTS, add_engine_args
from enginetui.flags.traces import TRACE_DATASET_HELP, TRACE_DATASETS, add_trace_args
from enginetui.interrupt import sigterm_interrupts
from enginetui.kernels import cpu_isa
from enginetui.vllm_launch import CORE_MODES, VLLM_PYTHON_ENV

OFFLINE_HELP = {  # throughput runs LLM.generate, whose CPU step budget is vLLM's offline one
    "--max-num-batched-tokens": f"token budget of one step (default: {OFFLINE_CPU_MAX_NUM_BATCHED_TOKENS} on CPU, "
    f"as vLLM's LLM; {ENGINE_DEFAULTS['max_num_batched_tokens']} on CUDA)",
}
VLLM_PYTHON_HELP = f"the Python interpreter of vLLM's virtual environment (default: ${VLLM_PYTHON_ENV})"
EVENT_MODES = (
    "off",
    "on",
    "subscriber",
    "record",
)  # step events not built / published / with a live subscriber / recorded to a file


def add_bench_subparsers(subparsers: argparse._SubParsersAction) -> None:
    """Add `bench` and its subcommands to the top-level `enginetui` subparsers."""
    bench = subparsers.add_parser(
        "bench",
        help="benchmark the engine: throughput, latency, step profile",
        description="Benchmarks of the engine. Engine flags use vLLM's names.",
    )
    kinds = bench.add_subparsers(dest="bench_command", title="benchmarks", metavar="BENCH", required=True)

    tp = kinds.add_parser(
        "throughput",
        help="offline throughput (like `vllm bench throughput`)",
        description="Offline throughput of LLM.generate on a seeded random workload.",
    )
    add_workload_args(tp)
    tp.add_argument(
        "--compare",
        choices=("hf", "vllm"),
        nargs="+",
        default=[],
        metavar="PEER",
        help="also run these on the same prompts and weights: hf (transformers generate), vllm "
        "(vLLM's LLM, through --vllm-python); both in one run: --compare vllm hf",
    )
    tp.add_argument(
        "--hf-batch-sizes",
        type=int,
        nargs="+",
        default=[8, 16, 32],
        metavar="N",
        help="static batch sizes tried for the HF baseline; the best is kept (default 8 16 32)",
    )
    tp.add_argument(
        "--events",
        choices=EVENT_MODES,
        nargs="+",
        default=None,
        metavar="MODE",
        help="step events: off (not built), on (built and published; the default), subscriber "
        "(with a live SUB subscriber thread), record (recorded to a file: --record FILE, else a "
        "temporary one). Several modes: runs interleaved, ratios to off (and record to on)",
    )
    tp.add_argument(
        "--repeats",
        type=_positive,
        default=1,
        help="timed passes per mode (events, competing load, vLLM cores); the best is kept",
    )
    _add_peer_args(tp)
    add_record_arg(tp)
    _add_plot_arg(tp)
    _add_common(tp, "throughput")

    lat = kinds.add_parser(
        "latency",
        help="online latency under Poisson arrivals (like `vllm bench serve`)",
        description="Requests arrive by a seeded Poisson process and stream through AsyncLLM.",
    )
    add_workload_args(lat)
    lat.add_argument(
        "--request-rate",
        type=float,
        default=float("inf"),
        help="mean requests per second of the Poisson arrivals (default inf: all at once)",
    )
    lat.add_argument(
        "--compare",
        choices=("vllm",),
        nargs="+",
        default=[],
        metavar="PEER",
        help="also run vLLM's AsyncLLM on the same requests, arrivals and weights (through --vllm-python)",
    )
    _add_peer_args(lat)
    add_record_arg(lat)
    _add_plot_arg(lat)
    _add_common(lat, "latency")

    srv = kinds.add_parser(
        "serve",
        help="online serving over HTTP (like `vllm bench serve`), its overhead, and against vLLM's server",
        description="Requests arrive by a seeded Poisson process and "
        "stream from `enginetui serve` (started with the engine flags given, or --base-url); "
        "--compare generate adds the server's overhead against LLM.generate on the same workload "
        "(vllm-generate: vLLM's too, beside ours); "
        "--compare vllm-server runs vLLM's OpenAI server beside ours on the same weights, "
        "requests and arrivals, the two taking turns at each --request-rate.",
    )
    add_workload_args(srv)
    trace = srv.add_argument_group(
        "trace (instead of the workload flags: the requests and arrivals `enginetui simulate` serves for the same "
        "flags, fitted to --max-model-len or the model's length)"
    )
    trace.add_argument("--dataset", choices=sorted(TRACE_DATASETS), help=TRACE_DATASET_HELP)
    add_trace_args(trace)
    srv.add_argument(
        "--request-rate",
        type=_rate,
        nargs="+",
        default=[float("inf")],
        metavar="RATE",
        help="mean requests per second of the Poisson arrivals (default inf: all at once); several "
        "with --compare vllm-server, e.g. 0.5 1 2 (each server runs them in turn)",
    )
    srv.add_argument(
        "--base-url",
        metavar="URL",
        help="benchmark this running server (its engine flags are its "
        "own); default: start `enginetui serve` with the engine flags given",
    )
    srv.add_argument(
        "--router-url",
        metavar="URL",
        help="benchmark the servers of --model behind this router (e.g. vllm-router); prompts go as text, "
        "one single-token word per token id, so a router that routes by prompt text sees what they share",
    )
    srv.add_argument("--api-key", metavar="KEY", help="the server's API key (with --base-url or --router-url)")
    srv.add_argument(
        "--compare",
        choices=("generate", "vllm-generate", "vllm-server"),
        help="generate: also run the workload all at once through a server and through "
        "LLM.generate, taking turns, each pass in an engine started for it; vllm-generate: the "
        "same for vLLM's server and vLLM's LLM.generate too (through --vllm-python, on every "
        "core), all four taking turns on the same weights; vllm-server: also "
        "run vLLM's OpenAI server (through --vllm-python, on every core) on the same weights, "
        "requests and arrivals, and print ours / vLLM's",
    )
    srv.add_argument(
        "--repeats",
        type=_positive,
        default=3,
        help="passes of each side with --compare generate "
        "or vllm-generate, "
        "and of each server at each rate with --compare vllm-server (taking turns; default 3)",
    )
    srv.add_argument(
        "--goodput",
        nargs="+",
        metavar="NAME:MS",
        help="SLOs of goodput (requests per second meeting every one), as vLLM's bench names them: "
        "ttft, tpot, e2el in milliseconds, e.g. --goodput ttft:2000 tpot:200",
    )
    srv.add_argument(
        "--timeout-s",
        type=float,
        default=1800.0,
        help="most seconds one pass of the workload may take; past it the benchmark fails (default 1800)",
    )
    srv.add_argument(
        "--vllm-python",
        metavar="PATH",
        help=f"vLLM's interpreter, for --compare vllm-server and vllm-generate (default: ${VLLM_PYTHON_ENV})",
    )
    srv.add_argument(
        "--record",
        metavar="FILE",
        help="the server this benchmark starts records every step event to FILE (`enginetui serve "
        "--record`): replay it, or compare it with its simulation (python "
        "tools/sim_accuracy.py FILE)",
    )
    srv.add_argument(
        "--step-times",
        action="store_true",
        help="with --compare vllm-server: also time every engine step of both servers (ours from "
        "its recorded step events, vLLM's from its --enable-logging-iteration-details log) "
        "and print the median model time per step kind, ours against vLLM's",
    )
    _add_common(srv, "serve")

    prof = kinds.add_parser(
        "profile",
        help="share of each step stage at 1, 16 and 64 running decode requests",
        description="Where a decode step's time goes (in-process engine, per-stage timings).",
    )
    prof.add_argument(
        "--batch-sizes",
        type=_positive,
        nargs="+",
        default=[1, 16, 64],
        metavar="N",
        help="running decode requests to profile (default 1 16 64)",
    )
    prof.add_argument("--input-len", type=_positive, default=64, help="prompt tokens of each request (default 64)")
    prof.add_argument("--warmup-steps", type=int, default=5, help="decode steps run before measuring (default 5)")
    prof.add_argument("--steps", type=_positive, default=20, help="decode steps averaged (default 20)")
    _add_plot_arg(prof)
    _add_common(prof, "profile")

    ops = kinds.add_parser(
        "ops",
        help="where a step's milliseconds go, operator by operator; --compare vllm: against vLLM's on the same batch",
        description="Decode steps of a full batch (with "
        "--prompt-lens, each also computing a new prompt), timed then under the torch profiler, "
        "each operator's self time summed by kind of work (attention, KV writes, GEMMs, sampling, "
        "compiled regions, other operators, outside operators); with --compare vllm the same for "
        "vLLM's in-process engine, the engines taking turns. Measure on a quiet machine.",
    )
    ops.add_argument(
        "--batch-sizes",
        type=_non_negative,
        nargs="+",
        default=[1, 8, 32],
        metavar="N",
        help="decoding requests of each measured batch (default 1 8 32; 0 with --prompt-lens: the prompt alone)",
    )
    ops.add_argument(
        "--input-len",
        type=_positive,
        default=512,
        help="prompt tokens of each decoding request: its context (default 512)",
    )
    ops.add_argument(
        "--prompt-lens",
        type=_positive,
        nargs="+",
        default=[],
        metavar="L",
        help="also measure steps that compute a new prompt of L tokens beside the batch (a request "
        "arriving; one shape per batch size and L); default: decode steps only",
    )
    _add_measuring_args(ops, "step shape")
    _add_common(ops, "ops")

    roof = kinds.add_parser(
        "roofline",
        help="each step kind against this machine's limits (memory bandwidth, GEMM peak); --compare vllm: vLLM's too",
        description="Measures this machine's memory bandwidth (a STREAM-style triad) and GEMM peak in the "
        "step's dtype (through the engine's linear path) on the engine's threads, then times decode steps "
        "at each batch size and context and prompt chunks alone, as `bench ops` does, and prints each step's "
        "bytes and FLOPs, its floor max(bytes / bandwidth, FLOPs / GEMM peak), the fraction of it reached "
        "(floor / step time) and where the step's time goes. Measure on a quiet machine.",
    )
    roof.add_argument(
        "--batch-sizes",
        type=_positive,
        nargs="+",
        default=[1, 8, 32, 64],
        metavar="N",
        help="running requests of the decode steps (default 1 8 32 64)",
    )
    roof.add_argument(
        "--contexts",
        type=_positive,
        nargs="+",
        default=[128, 1024],
        metavar="TOKENS",
        help="prompt tokens of each decoding request: its context (default 128 1024)",
    )
    roof.add_argument(
        "--prompt-lens",
        type=_positive,
        nargs="*",
        default=[64, 512, 2048],
        metavar="L",
        help="prompt chunks computed alone, one per step (default 64 512 2048; clipped to max_model_len "
        "and the step's token budget; none: decode only)",
    )
    roof.add_argument(
        "--array-mib",
        type=float,
        metavar="MIB",
        help="each triad array's size (default: 4x the largest CPU cache, at least 64 MiB)",
    )
    roof.add_argument(
        "--gemm-size", type=_positive, default=4096, help="the peak's GEMM is SIZE x SIZE by SIZE x SIZE (default 4096)"
    )
    roof.add_argument(
        "--limit-repeats", type=_positive, default=5, help="timed runs of the triad and of the GEMM; the best is kept"
    )
    _add_measuring_args(roof, "step kind")
    _add_common(roof, "roofline")

    sch = kinds.add_parser(
        "scheduling",
        help="synchronous steps against --async-scheduling: decode at 1, 16 and 64 running, and a workload",
        description="Throughput, TPOT and the step overhead the "
        "overlap hides, with and without asynchronous scheduling. Measure on a quiet machine.",
    )
    add_workload_args(sch)
    sch.add_argument(
        "--modes",
        choices=("sync", "async"),
        nargs="+",
        default=["sync", "async"],
        metavar="MODE",
        help="scheduling modes to run, in turn (default sync async)",
    )
    sch.add_argument(
        "--batch-sizes",
        type=_positive,
        nargs="+",
        default=[1, 16, 64],
        metavar="N",
        help="running decode requests (default 1 16 64)",
    )
    sch.add_argument(
        "--decode-prompt-len", type=_positive, default=64, help="prompt tokens of each decode request (default 64)"
    )
    sch.add_argument("--warmup-steps", type=int, default=5, help="decode steps run before timing (default 5)")
    sch.add_argument("--steps", type=_positive, default=20, help="decode steps timed (default 20)")
    _add_common(sch, "scheduling")


def _add_peer_args(parser: argparse.ArgumentParser) -> None:
    """Sampling, competing load and vLLM flags shared by throughput and latency."""
    parser.add_argument(
        "--temperature",
        type=float,
        default=1.0,
        help="sampling temperature of every request (default 1.0; 0 is greedy, and then the "
        "output tokens are also compared with vLLM's)",
    )
    parser.add_argument(
        "--competing",
        choices=COMPETING_MODES,
        nargs="+",
        default=["none"],
        metavar="LOAD",
        help="what runs beside the engine during a pass: none, busy (one busy-looping process), "
        "dashboard (the real dashboard attached, drawing on a pseudo-terminal); several: "
        "passes interleaved, ratios to none (default none)",
    )
    parser.add_argument("--vllm-python", metavar="PATH", help=VLLM_PYTHON_HELP)
    parser.add_argument(
        "--vllm-cores",
        choices=CORE_MODES,
        nargs="+",
        default=["default"],
        metavar="MODE",
        help="vLLM's CPU threads: default (its own binding: one core kept for its front-end), "
        "all (the model on every core); several: one vLLM engine each (default: default)",
    )


def _add_measuring_args(parser: argparse.ArgumentParser, shape: str) -> None:
    """How `bench ops` and `bench roofline` measure steps, and vLLM's engine beside ours; `shape`
    names what each pass measures."""
    parser.add_argument("--warmup-steps", type=int, default=5, help="steps run before measuring (default 5)")
    parser.add_argument(
        "--steps", type=_positive, default=10, help="steps timed, and as many profiled, per pass (default 10)"
    )
    parser.add_argument(
        "--repeats", type=_positive, default=3, help=f"passes of each engine per {shape}, in turns (default 3)"
    )
    parser.add_argument(
        "--temperature",
        type=float,
        default=1.0,
        help="sampling temperature of every request (default 1.0; 0 is greedy)",
    )
    parser.add_argument(
        "--compare",
        choices=("vllm",),
        nargs="+",
        default=[],
        metavar="PEER",
        help="vllm: also measure vLLM's engine (through --vllm-python) on the same weights and prompts",
    )
    parser.add_argument("--vllm-python", metavar="PATH", help=VLLM_PYTHON_HELP)
    parser.add_argument(
        "--vllm-cores",
        choices=CORE_MODES,
        default="all",
        help="vLLM's CPU threads: all (the model on every core, as ours; default) or default (its "
        "own binding: one core kept for its front-end)",
    )


def _add_plot_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--plot",
        metavar="PNG",
        help="also draw the results into this PNG (matplotlib): "
        "throughput against the peers, latency CDFs, or where a step's time goes (profile)",
    )


def _add_common(parser: argparse.ArgumentParser, module: str) -> None:
    add_engine_args(parser, OFFLINE_HELP if module == "throughput" else None, subcommand=True)
    parser.add_argument(
        "--disable-detokenize",
        action="store_true",
        help="run without a tokenizer (outputs are not detokenized); automatic if the model has none",
    )
    parser.add_argument(
        "--json",
        metavar="PATH",
        help="also write the run's record as JSON to PATH: every pass, the "
        "figures compared, the CPU, the command, the commit and the date",
    )
    parser.add_argument(
        "--save-result",
        action="store_true",
        help="also write that record into --result-dir, named date-time-cpu-workload.json (as vLLM's "
        "bench names the flag); the repository's results/ is where the results tables come from",
    )
    parser.add_argument(
        "--result-dir", default=RESULT_DIR, metavar="DIR", help=f"where --save-result writes (default: {RESULT_DIR})"
    )
    parser.add_argument(
        "--result-filename",
        metavar="NAME",
        help="the file name --save-result writes (default: date-time-cpu-workload.json)",
    )
    parser.add_argument(
        "--cpu-isa",
        choices=tuple(cpu_isa.NARROWER_ISAS),
        metavar="ISA",
        help="run every engine (and vLLM) as if on a CPU with only this instruction set: avx2 "
        "(torch, oneDNN, MKL, our C++ kernels and vLLM's build all take their AVX2 code; "
        "the benchmark restarts itself with ENGINETUI_CPU_ISA=avx2, see kernels/cpu_isa.py)",
    )
    parser.set_defaults(func=lambda args: _run(module, args))


RUNNERS = {"profile": "decode_profile"}  # subcommands whose module in enginetui.bench has another name


def _run(module: str, args: argparse.Namespace) -> int:
    """Run one benchmark; errors a user can cause (bad model, workload or flags) print one line, exit 2."""
    from enginetui.core.engine.errors import EngineStartupError

    if args.cpu_isa:
        if not cpu_isa.applied(args.cpu_isa):  # restart with the libraries told before they start
            os.execve(
                sys.executable, [sys.executable, "-m", "enginetui", *args.argv], cpu_isa.environment(args.cpu_isa)
            )
        print(
            f"bench: as if on a CPU with only {args.cpu_isa.upper()} ({cpu_isa.CPU_ISA_ENV}={args.cpu_isa}): "
            "the code paths of that CPU, on this machine's cores, caches and memory"
        )
    args.started = datetime.datetime.now(datetime.UTC)  # the run's date in its record
    runner = "serve_vs_vllm" if module == "serve" and args.compare == "vllm-server" else RUNNERS.get(module, module)
    try:
        check_destinations(args.json, args.result_dir if args.save_result else None)
        with sigterm_interrupts():  # `kill PID` too ends every engine, server and load the benchmark started
            return importlib.import_module(f"enginetui.bench.{runner}").main(args)
    except (ValueError, TimeoutError, EngineStartupError) as exc:
        print(f"enginetui bench {module}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"enginetui bench {module}: interrupted; every engine and server it started is stopped", file=sys.stderr)
        return 130


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _rate(text: str) -> float:
    """A request rate: a positive number of requests per second, or inf (all at once)."""
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive (or inf), got {text}")
    return value
