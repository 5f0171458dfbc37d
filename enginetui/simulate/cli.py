"""`enginetui simulate ...`: the parser and the command. Building the parser imports nothing heavy;
the simulator is imported when the command runs."""

import argparse
import math
import sys

from enginetui.flags.traces import TRACE_DATASET_HELP, add_trace_args, check_trace_args, uses_trace
from enginetui.interrupt import sigterm_quits

SIM_ENGINE_FLAGS = (
    "max_num_batched_tokens",
    "max_num_seqs",
    "block_size",
    "num_gpu_blocks_override",
    "kv_cache_memory_bytes",
    "enable_chunked_prefill",
    "enable_prefix_caching",
    "scheduling_policy",
    "scheduler_reserve_full_isl",
    "long_prefill_token_threshold",
    "max_model_len",
)  # flags that apply


def add_simulate_subparser(subparsers: argparse._SubParsersAction) -> None:
    from enginetui.core.engine.kv_sizing import DEFAULT_GPU_MEMORY_UTILIZATION

    p = subparsers.add_parser(
        "simulate",
        help="the engine's scheduler at any scale, on a simulated clock (no model is run)",
        description="Serve a workload with the engine's own scheduler and KV cache manager but no model: each "
        "request generates its workload output length, and a step-time model (a roofline of an "
        "accelerator, a fit of this engine's measured steps, or a recording's own step times) moves "
        "the clock. Prints vllm bench serve's figures; --record writes the run for `enginetui replay` "
        "and `enginetui export`.",
    )
    quiet = argparse.SUPPRESS  # unset flags leave the top-level parser's values (and defaults) alone
    m = p.add_argument_group("model and hardware")
    m.add_argument(
        "--model",
        default=quiet,
        metavar="NAME|DIR",
        help="a shipped config (llama-3.1-8b, llama-3.1-70b, qwen3-8b, opt-125m) or a directory / "
        "config.json (default: llama-3.1-8b)",
    )
    m.add_argument(
        "--hardware",
        default="h200",
        metavar="NAME",
        help="h200, h100, a100 or l4 (default: h200); a fleet's per replica, e.g. h200*2,h100*2 (a mixed fleet)",
    )
    m.add_argument("--tensor-parallel-size", "-tp", type=int, default=1, metavar="N", help="GPUs (default: 1)")
    m.add_argument("--weight-dtype", default="bf16", choices=("bf16", "fp16", "fp8"), help="default: bf16")
    m.add_argument(
        "--kv-cache-dtype", default="auto", choices=("auto", "bf16", "fp16", "fp8"), help="default: auto (16-bit)"
    )
    m.add_argument(
        "--gpu-memory-utilization",
        type=float,
        default=DEFAULT_GPU_MEMORY_UTILIZATION,
        metavar="F",
        help="share of device memory for weights, activations and KV cache (default: vLLM's, "
        f"{DEFAULT_GPU_MEMORY_UTILIZATION:g})",
    )
    m.add_argument(
        "--step-times",
        default="roofline",
        metavar="roofline|recorded|FILE",
        help="the step-time model: roofline, recorded (a --from-recording run's own), or a JSON file "
        "from --calibrate (default: roofline); a fleet's per replica, e.g. a.json,b.json or a.json*2,roofline*2",
    )
    m.add_argument("--mfu", type=float, metavar="F", help="roofline: share of peak FLOP/s reached (default: 0.5)")
    m.add_argument("--mbu", type=float, metavar="F", help="roofline: share of peak bandwidth reached (default: 0.8)")
    m.add_argument(
        "--step-overhead-ms",
        type=float,
        dest="overhead_ms",
        metavar="MS",
        help="roofline: fixed milliseconds per step (default: 1)",
    )
    w = p.add_argument_group("workload")
    w.add_argument(
        "--dataset",
        default="random",
        choices=("random", "sharegpt", "shared-prefix", "azure-conv", "mooncake"),
        help=f"default: random; {TRACE_DATASET_HELP}",
    )
    add_trace_args(w)
    w.add_argument(
        "--num-prompts",
        type=int,
        default=quiet,
        metavar="N",
        help="default: 1000 (a trace serves every request of its window)",
    )
    w.add_argument(
        "--random-input-len",
        dest="input_len",
        type=int,
        default=1024,
        metavar="N",
        help="random / shared-prefix: mean prompt length (default: 1024)",
    )
    w.add_argument(
        "--random-output-len",
        dest="output_len",
        type=int,
        default=128,
        metavar="N",
        help="random / shared-prefix: mean output length (default: 128)",
    )
    w.add_argument(
        "--random-range-ratio",
        dest="range_ratio",
        type=float,
        default=0.0,
        metavar="R",
        help="lengths drawn from [len*(1-R), len*(1+R)] (default: 0)",
    )
    w.add_argument(
        "--prefix-len", type=int, default=512, metavar="N", help="shared-prefix: prefix tokens (default: 512)"
    )
    w.add_argument("--num-prefixes", type=int, default=4, metavar="N", help="shared-prefix: prefixes (default: 4)")
    w.add_argument(
        "--tokenizer",
        default=quiet,
        metavar="DIR|embedded",
        help="sharegpt: count tokens with this tokenizer (default: UTF-8 bytes / 4)",
    )
    w.add_argument("--from-recording", metavar="FILE", help="serve a recorded run's requests, as they arrived")
    w.add_argument(
        "--request-rate",
        type=float,
        default=math.inf,
        metavar="R",
        help="requests per second, Poisson arrivals (default: inf, all at once)",
    )
    w.add_argument(
        "--burstiness",
        type=float,
        default=1.0,
        metavar="B",
        help="gamma shape of the arrival gaps, as vllm bench serve (default: 1, Poisson)",
    )
    w.add_argument("--burst-size", type=int, default=1, metavar="N", help="requests arriving together (default: 1)")
    w.add_argument("--seed", type=int, default=quiet, help="workload and arrival seed (default: 0)")
    f = p.add_argument_group("fleet")
    f.add_argument(
        "--replicas",
        type=int,
        default=1,
        metavar="N",
        help="engines behind a router, each its own scheduler, KV pool and clock (default: 1)",
    )
    f.add_argument(
        "--front-end-ms",
        type=float,
        default=0.0,
        metavar="MS",
        help="the served path: each engine's HTTP front-end (and the router hop) takes MS per request, one at a "
        "time, before the engine takes the request in; its TTFT and E2E count from its arrival at the front-end "
        "(default: 0, the engine's view; tools/fleet_accuracy.py measures it)",
    )
    f.add_argument(
        "--front-end-us-per-token",
        type=float,
        default=0.0,
        metavar="US",
        help="the served path: each engine's front-end also streams every sampled token to its client, US a "
        "token, in the same queue as the requests it takes in: a busy engine's stream delays the next request, "
        "and a busy front-end the tokens (default: 0; tools/fleet_accuracy.py measures it)",
    )
    f.add_argument(
        "--front-end-us-per-step",
        type=float,
        default=0.0,
        metavar="US",
        help="the served path: each engine's front-end takes US to take in a step's outputs, however many tokens, "
        "in the same queue (default: 0; tools/fleet_accuracy.py measures it)",
    )
    f.add_argument(
        "--router-tokenize-ms",
        type=float,
        default=0.0,
        metavar="MS",
        help="the served path behind --router cache-aware: before routing a request, vllm-router asks every replica to "
        "tokenize its prompt; each replica's front-end takes MS on it in the same queue, and the request goes on when "
        "every replica has answered (default: 0; tools/fleet_accuracy.py measures it)",
    )
    f.add_argument(
        "--shared-host-slowdown",
        type=float,
        default=0.0,
        metavar="X",
        help="the replicas share one machine: a step takes 1 + X times as long while every other replica is "
        "busy (its share of them, with more than two), as their steps contend for memory bandwidth and caches "
        "(default: 0, a machine each; tools/fleet_accuracy.py measures it)",
    )
    f.add_argument(
        "--router",
        default=quiet,
        metavar="NAME",
        help="round-robin, random, power-of-two, consistent-hash, cache-aware (vllm-router's policies "
        "and its defaults), least-outstanding (Vidur's) or prefix-score (llm-d's precise prefix-cache "
        "scoring) (default: cache-aware, vllm-router's)",
    )
    f.add_argument(
        "--prefill-replicas",
        type=int,
        default=quiet,
        metavar="P",
        help="disaggregated prefill (vllm-router's --vllm-pd-disaggregation): P engines serve the prompts, "
        "with --decode-replicas D engines generating after each prompt's KV crosses the link",
    )
    f.add_argument("--decode-replicas", type=int, default=quiet, metavar="D", help="the decode pool's engines")
    f.add_argument(
        "--prefill-policy",
        default=quiet,
        metavar="NAME",
        help="the prefill pool's router, as vllm-router's flag (default: --router)",
    )
    f.add_argument(
        "--decode-policy",
        default=quiet,
        metavar="NAME",
        help="the decode pool's router, as vllm-router's flag (default: --router)",
    )
    f.add_argument(
        "--kv-transfer-bandwidth",
        type=float,
        default=quiet,
        metavar="GB/S",
        help="disaggregated prefill: the link a prompt's KV crosses, GB/s (default: 50, one 400 Gb/s NIC)",
    )
    e = p.add_argument_group("engine (vLLM's flag names; the engine's defaults)")
    from enginetui.flags.engine import ENGINE_FLAGS

    for spec in ENGINE_FLAGS:
        if spec.dest in SIM_ENGINE_FLAGS:
            e.add_argument(spec.flag, default=quiet, help=f"{spec.help}".replace("%", "%%"), **spec.kwargs)
    o = p.add_argument_group("output")
    o.add_argument("--goodput", nargs="+", metavar="NAME:MS", help="SLOs for goodput, e.g. ttft:500 tpot:50")
    o.add_argument("--record", metavar="FILE", help="write the run as a recording (enginetui replay / export)")
    o.add_argument(
        "--sweep",
        metavar="NAME=V1,V2,...",
        help="run once per value of an engine flag or setting (e.g. request_rate=5,10,20, or "
        "replicas=1,2,4,8 with --goodput: the smallest fleet meeting the SLOs) and plot",
    )
    o.add_argument("--plot", metavar="FILE", help="with --sweep: where the plot goes (default: sweep-NAME.png)")
    o.add_argument("--no-progress", action="store_true", help="no progress bar")
    o.add_argument(
        "--watch",
        action="store_true",
        help="show the run live in the dashboard as it is simulated (q quits and stops it)",
    )
    o.add_argument(
        "--speed",
        type=float,
        default=1.0,
        metavar="X",
        help="with --watch: simulated seconds per wall second (0: as fast as it can be drawn; default: 1)",
    )
    c = p.add_argument_group("calibration")
    c.add_argument(
        "--calibrate",
        metavar="OUT.json",
        help="measure this engine's step times on this machine over a grid of batch shapes, fit a "
        "step-time model and save it (use it with --step-times OUT.json); measure on a quiet machine",
    )
    c.add_argument("--calibrate-model", metavar="DIR", help="the engine's model to measure (default: embedded)")
    c.add_argument("--calibrate-grid", default="standard", choices=("tiny", "standard"), help="default: standard")
    c.add_argument(
        "--calibrate-from-recording",
        nargs="+",
        metavar="FILE",
        help="RUN.etrec [RUN2.etrec ...] FIT.json: fit the same step-time model to the steps of recorded "
        "runs of this engine (each step's time from its start to the next step's start, what the "
        "engine spent per step as it ran there), e.g. `enginetui bench serve ... --record RUN.etrec` "
        "for the server path, where the HTTP front-end shares the CPU; save it to FIT.json",
    )
    p.set_defaults(func=run_simulate)


def _settings_and_flags(args: argparse.Namespace):
    from enginetui.simulate.api import SimSettings

    fields = SimSettings.__dataclass_fields__
    values = {k: v for k, v in vars(args).items() if k in fields and v is not None}
    values["model"] = getattr(args, "model", None) or "llama-3.1-8b"
    values["seed"] = getattr(args, "seed", None) or 0
    values["goodput"] = " ".join(args.goodput) if args.goodput else None
    if uses_trace(args) and getattr(args, "num_prompts", None) is not None:
        raise ValueError("--num-prompts: a trace serves every request of its window (give --trace-window)")
    check_trace_args(args)
    disaggregated = getattr(args, "prefill_replicas", None) or getattr(args, "decode_replicas", None)
    sweeps_fleet = args.sweep and args.sweep.lstrip("-").replace("-", "_").startswith("replicas")
    if getattr(args, "router", None) and values.get("replicas", 1) == 1 and not sweeps_fleet and not disaggregated:
        raise ValueError("--router: one replica has nothing to route (give --replicas N)")
    values["progress"] = not args.no_progress and sys.stderr.isatty()
    flags = {k: getattr(args, k) for k in SIM_ENGINE_FLAGS if getattr(args, k, None) is not None}
    return SimSettings(**values), flags


def run_simulate(args: argparse.Namespace) -> int:
    try:
        if args.calibrate:
            from enginetui.simulate.calibrate import run_calibration

            return run_calibration(args)
        if args.calibrate_from_recording:
            from enginetui.simulate.calibrate import run_recording_calibration

            return run_recording_calibration(args)
        settings, flags = _settings_and_flags(args)
        if args.sweep:
            return _run_sweep(args, settings, flags)
        if args.watch:
            return _run_watch(args, settings, flags)
        from enginetui.simulate.api import simulate
        from enginetui.simulate.report import format_summary

        result = simulate(settings, **flags)
    except (ValueError, OSError) as exc:
        print(f"enginetui simulate: {exc}", file=sys.stderr)
        return 2
    print(format_summary(result))
    if settings.record:
        print(f"recording     {settings.record} (enginetui replay {settings.record})")
    return _status(result)


def _status(result) -> int:
    """The exit status of a finished run: 1 if no request completed (every one was refused), else 0."""
    return 0 if result.summary.num_completed else 1


def _run_watch(args, settings, flags) -> int:
    from enginetui.simulate.api import check_fleet, fleet_models, fleet_roles, fleet_router, simulate
    from enginetui.simulate.fleet_watch import FleetWatchTUI
    from enginetui.simulate.report import format_summary
    from enginetui.simulate.watch import LiveSimulation, SimulatedEngine, SimWatchTUI
    from enginetui.terminal_check import SIMULATE_INSTEAD, refuse_without_terminal

    settings.progress = False  # the dashboard shows the progress
    check_fleet(settings)  # one line before the dashboard opens
    models = fleet_models(settings)  # (a mixed fleet's lists, checked likewise)
    live = LiveSimulation(lambda sink: simulate(settings, live=sink, **flags))
    engine = SimulatedEngine(live, args.speed, settings.model)  # a bad --speed is refused here
    if refuse_without_terminal("enginetui simulate --watch", SIMULATE_INSTEAD):
        return 2
    live.start()
    roles = fleet_roles(settings)
    app: SimWatchTUI | FleetWatchTUI
    if roles:
        app = FleetWatchTUI(engine, roles, fleet_router(settings), models)
    else:
        app = SimWatchTUI(engine)
    with sigterm_quits(app):
        app.run()
    engine.shutdown()
    live.join(timeout=5)
    if live.result is None:
        print("enginetui simulate: stopped before the run finished", file=sys.stderr)
        return app.return_code or 1
    print(format_summary(live.result))
    return app.return_code or _status(live.result)


def _run_sweep(args, settings, flags) -> int:
    from enginetui.simulate.report import describe_setup
    from enginetui.simulate.sweep import parse_sweep, plot_sweep, run_sweep, smallest_meeting, sweep_table

    sweep = parse_sweep(args.sweep)
    results = run_sweep(sweep, settings, flags)
    print("\n".join(describe_setup(results[0], sweep)))
    print()
    print(sweep_table(sweep, results))
    if settings.goodput:
        print(smallest_meeting(sweep, results))
    path = args.plot or f"sweep-{sweep.name}.png"
    plot_sweep(sweep, results, path)
    print(f"plot          {path}")
    return 0
