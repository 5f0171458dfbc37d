"""A real fleet against its simulation (issue #54's accuracy):

    python tools/fleet_accuracy.py OUT_DIR [--policies round_robin cache_aware power_of_two] [engine flags]

runs two `enginetui serve` replicas on this machine, each pinned to a core of its own with one compute thread
and prefix caching, behind a real vllm-router (vllm-router==ROUTER_VERSION from PyPI, installed into
--router-venv when missing), and drives them with slices of the two real traces (`enginetui bench serve
--router-url --dataset azure-conv|mooncake --trace-window --time-scale`). Per trace it first takes a
calibration run (round_robin, the window right after the tested one; with --calibrate-after once more after the
tested runs, since the machine drifts over a sitting), and fits the step-time model to each
replica's recorded steps in those runs (calibrate_from_recording: the VM's two cores run alike steps at speeds
up to 20% apart, so each replica gets its own, `simulate --step-times A,B`) and, from both replicas' steps, how
much longer a step takes while the other replica is busy (the two share the machine's memory bandwidth and
caches: calibrate.shared_host_slowdown). Then, per trace and policy, it serves the tested window on a fresh
fleet (empty prefix caches) and simulates the same requests on the same fleet and policy with those fits, that
slowdown (`--shared-host-slowdown`) and the trace's served path (`enginetui simulate --replicas 2 --router ...
--front-end-ms MS --front-end-us-per-step S --front-end-us-per-token T`: the front-end's time a request, one
request at a time per replica, with which the calibration run simulated gives the TTFT p50 its clients measured:
front_end_ms; and its time to stream a step's tokens, in the same queue: the CPU each front-end process used in
the calibration runs, fitted to the steps it streamed and their tokens: front_end_costs). It prints measured against
simulated TTFT p50 / p90, TPOT p50 and E2E p50 with the error, the mean absolute percentage error per trace
and policy, cache-aware's gain over round-robin, measured and simulated, and the busiest replica's TTFT as its
engine saw it (from its recording), which tells the engine's share of the client's TTFT from the router's and
the front-end's. With --repeats N each slice and policy is served N times on fresh fleets: the measured figures
are the runs' medians, and it also prints how far apart the runs came out (the measurement against itself),
which figures the simulation lands within the runs' range, and cache-aware's gain between each pair of runs.
Everything lands in OUT_DIR; --save also writes the results record to results/checks/; --again simulates again
what an earlier sitting left in OUT_DIR, serving nothing.
"""

import argparse
import contextlib
import datetime
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import psutil

ROUTER_VERSION = "0.1.17"
REPLICAS = 2  # one a core on the 2-core development machine
TARGET_PCT = 15.0  # issue #54: every figure within this of the measured one
TOKENIZE_PROBES = 40  # prompts the probe of a front-end's tokenize work sends
FIGURES = (
    ("TTFT p50", "ttft", "p50"),
    ("TTFT p90", "ttft", "p90"),
    ("TPOT p50", "tpot", "p50"),
    ("E2E p50", "e2e", "p50"),
)
POLICIES = {  # vllm-router's --policy -> enginetui simulate's --router
    "round_robin": "round-robin",
    "cache_aware": "cache-aware",
    "power_of_two": "power-of-two",
    "random": "random",
    "consistent_hash": "consistent-hash",
}
TRACES = ("azure-conv", "mooncake")
FRONT_END_MAX_MS = 200.0  # the most the served path's calibration looks for, per request
ROUTER_START_S = 60.0  # the router answering /v1/models
STOP_S = 10.0  # SIGTERM to exit, then SIGKILL


@dataclass(frozen=True, slots=True)
class Slice:
    """A window of a trace, at a time scale: what one run serves."""

    trace: str  # --dataset name
    start: float  # seconds into the trace
    end: float
    time_scale: float

    @property
    def window(self) -> str:
        return f"{self.start:g}:{self.end:g}"

    def calibration(self) -> "Slice":
        """The window of the same length right after this one: requests the tested runs do not serve."""
        return Slice(self.trace, self.end, 2 * self.end - self.start, self.time_scale)

    def flags(self) -> list[str]:
        return ["--dataset", self.trace, "--trace-window", self.window, "--time-scale", f"{self.time_scale:g}"]


def parse_window(text: str) -> tuple[float, float]:
    """`START:END` seconds -> (start, end); one line saying what is wrong otherwise."""
    start, sep, end = text.partition(":")
    try:
        bounds = (float(start), float(end))
    except ValueError:
        bounds = (0.0, -1.0)
    if not sep or not bounds[0] < bounds[1] or bounds[0] < 0:
        raise ValueError(f"a window is START:END seconds with 0 <= START < END, not {text!r}")
    return bounds


def error_pct(measured: float, simulated: float) -> float:
    """The simulation's error, percent of the measured figure."""
    return (simulated - measured) / measured * 100.0


def mape(errors: list[float]) -> float:
    """Mean absolute percentage error."""
    return sum(abs(e) for e in errors) / len(errors)


def gain(round_robin: float, cache_aware: float) -> float:
    """Cache-aware's gain over round-robin on a latency: how much lower, percent of round-robin's."""
    return (round_robin - cache_aware) / round_robin * 100.0


def median_figures(runs: list[dict[str, float]]) -> dict[str, float]:
    """Per figure, the median over repeated runs of one slice and policy."""
    return {name: float(np.median([run[name] for run in runs])) for name, _, _ in FIGURES}


def run_range(runs: list[dict[str, float]]) -> dict[str, tuple[float, float]]:
    """Per figure, the lowest and the highest of repeated runs of one slice and policy."""
    return {name: (min(r[name] for r in runs), max(r[name] for r in runs)) for name, _, _ in FIGURES}


def spread_pct(runs: list[dict[str, float]]) -> dict[str, float]:
    """Per figure, how far apart repeated runs came out: (highest - lowest) / median, percent."""
    middle = median_figures(runs)
    return {name: (high - low) / middle[name] * 100.0 for name, (low, high) in run_range(runs).items()}


def compare(measured: dict[str, float], simulated: dict[str, float]) -> dict[str, float]:
    """Per figure, the simulation's error (percent)."""
    return {name: error_pct(measured[name], simulated[name]) for name, _, _ in FIGURES}


def measured_figures(record: dict) -> dict[str, float]:
    """The figures of a `bench serve --json` record, milliseconds."""
    run = record["run"]
    return {name: run[f"{metric}_ms"][q] for name, metric, q in FIGURES}


def simulated_figures(summary) -> dict[str, float]:
    """The figures of a simulated run's summary, milliseconds."""
    return {name: getattr(getattr(summary, metric), q) for name, metric, q in FIGURES}


# ---- processes ------------------------------------------------------------------------------------------


def ensure_router(venv: Path, log=print) -> Path:
    """vllm-router==ROUTER_VERSION in its own virtual environment (created and installed from PyPI when missing)."""
    binary, python = venv / "bin" / "vllm-router", venv / "bin" / "python"
    if binary.exists():
        found = subprocess.run(
            [str(python), "-c", "from importlib.metadata import version; print(version('vllm-router'))"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        if found == ROUTER_VERSION:
            return binary
    log(f"installing vllm-router=={ROUTER_VERSION} into {venv}")
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", f"vllm-router=={ROUTER_VERSION}"], check=True)
    return binary


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def pinned(cpu: int) -> Iterator[None]:
    """This thread on one CPU while the block runs: the processes it starts inherit that."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM a process started in a session of its own and all of its group, SIGKILL after STOP_S."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(STOP_S)
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@contextlib.contextmanager
def fleet(
    router: Path, policy: str, engine_args: list[str], records: list[str], log_path: Path
) -> Iterator[tuple[str, list[int]]]:
    """REPLICAS `enginetui serve` replicas (replica i on CPU i, one compute thread, prefix caching, recording to
    records[i]) behind vllm-router with `policy`, all on 127.0.0.1; the router's URL and the replicas' front-end
    process ids. Everything is stopped on leaving, whatever happened."""
    from enginetui.serve.process import ServeProcess

    replicas: list[ServeProcess] = []
    proc = None
    cpus = sorted(os.sched_getaffinity(0))
    try:
        for i in range(REPLICAS):
            with pinned(cpus[i % len(cpus)]):
                replicas.append(
                    ServeProcess("--cpu-threads", "1", "--enable-prefix-caching", "--record", records[i], *engine_args)
                )
        port = free_port()
        command = [str(router), "--host", "127.0.0.1", "--port", str(port), "--policy", policy]
        command += ["--worker-urls", *(r.url for r in replicas), "--log-level", "warning"]
        with log_path.open("w") as out:
            proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + ROUTER_START_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"vllm-router exited ({proc.returncode}): see {log_path}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"vllm-router did not answer within {ROUTER_START_S:g} s: see {log_path}")
            time.sleep(0.2)
        yield url, [r.proc.pid for r in replicas]
    finally:
        if proc is not None:
            stop_group(proc)
        for replica in replicas:
            with contextlib.suppress(RuntimeError):
                replica.stop()


def bench(url: str, piece: Slice, engine_args: list[str], out: Path, timeout_s: float) -> dict:
    """`enginetui bench serve --router-url` on a slice; its --json record."""
    command = [sys.executable, "-m", "enginetui", "bench", "serve", "--router-url", url, *piece.flags()]
    command += ["--json", str(out), "--timeout-s", f"{timeout_s:g}", *engine_args]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, timeout=timeout_s + 60)
    return json.loads(out.read_text())


def engine_side(record: str, fit: str) -> dict[str, list[float]]:
    """A replica as its engine saw its requests (its recording; the TTFT from their arrival at the engine), measured
    and simulated alone with the fit: what of the client's figures the front-end and the router took."""
    from enginetui.simulate.measured import compare_recording

    wanted = {"TTFT p50 ms": "TTFT p50", "TTFT p90 ms": "TTFT p90"}
    return {wanted[f]: [m, p] for f, m, p, _ in compare_recording(record, fit) if f in wanted}


def decode_steps(record: str, fit: str, batches=(1, 2, 4, 8, 16)) -> dict[str, list[float]]:
    """A replica's decode-only steps by requests decoding (its recording): per batch in `batches` that it ran,
    [the steps' median time from start to start, the median of the fit's prices for them, how many steps],
    milliseconds."""
    from enginetui.simulate.calibrate import recorded_steps
    from enginetui.simulate.fitted import load_fitted

    model = load_fitted(fit)
    steps = recorded_steps(record)
    out: dict[str, list[float]] = {}
    for batch in batches:
        picked = [
            (seconds, shape)
            for shape, seconds in zip(steps.shapes, steps.seconds)
            if not shape.num_prefill_tokens and shape.num_sampled == batch
        ]
        if picked:
            out[str(batch)] = [
                float(np.median([seconds for seconds, _ in picked])) * 1e3,
                float(np.median([model.step_seconds(shape) for _, shape in picked])) * 1e3,
                len(picked),
            ]
    return out


def front_end_ms(
    cal: Slice, target: float, fit: str, model: str, slowdown: float = 0.0, stream: tuple[float, float] = (0.0, 0.0)
) -> float:
    """The served path, measured on calibration runs: the front-end's milliseconds per request
    (`simulate --front-end-ms`, one queue per replica, which also streams each step's tokens at `stream`, µs a
    step and a token) with which the calibration window, simulated on the same fleet with the fit, gives
    `target`, the TTFT p50 its clients measured (the mean of its runs' `bench serve` records); bisected to 0.1
    ms."""
    low, high = 0.0, FRONT_END_MAX_MS
    if simulate_slice(cal, "round_robin", fit, model, 0.0, slowdown, stream)[0]["TTFT p50"] >= target:
        return 0.0
    while high - low > 0.1:
        mid = (low + high) / 2
        if simulate_slice(cal, "round_robin", fit, model, mid, slowdown, stream)[0]["TTFT p50"] < target:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def served(record: str) -> int:
    """Requests of the workload a replica took in, from its recording (bench serve's warm-up left out)."""
    from enginetui.bench.workload import warmup_workload
    from enginetui.simulate.from_recording import recorded_run

    warmup = {(r.prompt_len, r.output_len) for r in warmup_workload(2)}
    return sum((r.prompt_len, r.output_len) not in warmup for r in recorded_run(record).requests)


# ---- the sitting ---------------------------------------------------------------------------------------


def simulate_slice(
    piece: Slice,
    policy: str,
    fit: str,
    model: str,
    front_end: float = 0.0,
    slowdown: float = 0.0,
    stream: tuple[float, float] = (0.0, 0.0),
    tokenize: float = 0.0,
) -> tuple[dict, list[int]]:
    """The slice on a simulated fleet of REPLICAS with the fit, a front-end of `front_end` ms a request (and
    streaming each step's tokens at `stream`, µs a step and a token) and the shared host's `slowdown`; its figures
    and requests per replica."""
    from enginetui.simulate import simulate

    result = simulate(
        model=model,
        step_times=fit,
        dataset=piece.trace,
        trace_window=piece.window,
        time_scale=piece.time_scale,
        replicas=REPLICAS,
        router=POLICIES[policy],
        enable_prefix_caching=True,
        front_end_ms=front_end,
        front_end_us_per_step=stream[0],
        front_end_us_per_token=stream[1],
        shared_host_slowdown=slowdown,
        router_tokenize_ms=tokenize if POLICIES[policy] == "cache-aware" else 0.0,
    )
    assert result.fleet is not None
    return simulated_figures(result.summary), [s.num_requests for s in result.fleet.summaries]


def serve(
    args: argparse.Namespace, router: Path, policy: str, engine_args: list[str], records: list[str], name: Path, piece
) -> dict:
    """A run of the slice on a fresh fleet behind `policy` (recordings to `records`, the router's log and the
    bench record beside `name`); its bench record. With --again: the record a sitting left there before."""
    if args.again:
        path = name.with_suffix(".json")
        if not path.exists() or not all(Path(r).exists() for r in records):
            raise SystemExit(f"--again: {path} or its recordings are missing: run the sitting without --again first")
        return json.loads(path.read_text())
    with fleet(router, policy, engine_args, records, name.with_name(name.name + "-router.log")) as (url, pids):
        before = [front_end_cpu_s(pid) for pid in pids]
        record = bench(url, piece, engine_args, name.with_suffix(".json"), args.timeout_s)
        cpu = [front_end_cpu_s(pid) - b for pid, b in zip(pids, before)]
    name.with_name(name.name + "-front-end-cpu.json").write_text(json.dumps(cpu) + "\n")
    return record


def router_prompts(engine_args: list[str], piece: Slice, count: int = TOKENIZE_PROBES) -> list[str]:
    """The slice's first `count` prompts as the router gets them: text, one word a token (bench/router_prompts.py)."""
    from enginetui.bench.router_prompts import model_words, prompt_text
    from enginetui.simulate.traces import dataset_path, parse_window, read_trace, trace_workload
    from enginetui.simulate.workload import prompt_token_ids

    model = engine_args[engine_args.index("--model") + 1] if "--model" in engine_args else None
    max_len = int(engine_args[engine_args.index("--max-model-len") + 1]) if "--max-model-len" in engine_args else 512
    requests, _ = trace_workload(
        read_trace(dataset_path(piece.trace)), parse_window(piece.window), 1.0, max_len, "clip"
    )
    words = model_words({"model": model})
    return [prompt_text(prompt_token_ids(r), words) for r in requests[:count]]


def measure_router_tokenize_ms(engine_args: list[str], prompts: list[str]) -> float:
    """The CPU milliseconds a replica's front-end spends on one prompt vllm-router's cache_aware asks it to tokenize
    (0.1.17: POST /v1/completions/render, which `enginetui serve` answers 404, then POST /tokenize), measured on a
    replica alone, pinned as the fleet's are, over `prompts`."""
    from enginetui.serve.process import ServeProcess

    with pinned(sorted(os.sched_getaffinity(0))[0]):
        replica = ServeProcess("--cpu-threads", "1", *engine_args)
    try:
        with httpx.Client(base_url=replica.url, timeout=60) as client:
            before = front_end_cpu_s(replica.proc.pid)
            for prompt in prompts:
                client.post("/v1/completions/render", json={"model": "default", "prompt": prompt})
                client.post("/tokenize", json={"model": "default", "prompt": prompt}).raise_for_status()
            return (front_end_cpu_s(replica.proc.pid) - before) / len(prompts) * 1e3
    finally:
        replica.stop()


def front_end_cpu_s(pid: int) -> float:
    """CPU seconds the replica's front-end process (`enginetui serve` itself, not its EngineCore) has used."""
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def front_end_costs(runs: list[tuple[list[str], Path]]) -> tuple[float, float] | None:
    """The front-ends' CPU seconds per step streamed (a step that sampled: its outputs taken in at once) and per
    token, fitted (least squares, with a constant for the process's own idle work) to what each replica's
    front-end process used in the calibration runs (their `-front-end-cpu.json`) against the steps and tokens its
    recording shows; None where a run has no such measure (a sitting from before it)."""
    from enginetui.simulate.calibrate import recorded_steps
    from enginetui.simulate.from_recording import recorded_run

    rows, used = [], []
    for records, name in runs:
        path = name.with_name(name.name + "-front-end-cpu.json")
        if not path.exists():
            return None
        for record, cpu in zip(records, json.loads(path.read_text())):
            steps = sum(1 for shape in recorded_steps(record).shapes if shape.num_sampled)
            rows.append([1.0, steps, sum(r.output_len for r in recorded_run(record).requests)])
            used.append(cpu)
    _, step_s, token_s = np.linalg.lstsq(np.array(rows), np.array(used), rcond=None)[0]
    return max(float(step_s), 0.0), max(float(token_s), 0.0)


def sitting(args: argparse.Namespace, engine_args: list[str], log=print) -> dict:
    from enginetui.simulate.calibrate import calibrate_from_recording, shared_host_slowdown

    out = Path(args.out)
    router = Path() if args.again else ensure_router(Path(args.router_venv), log)
    windows = {"azure-conv": parse_window(args.azure_window), "mooncake": parse_window(args.mooncake_window)}
    pieces = [Slice(trace, *windows[trace], args.time_scale) for trace in args.traces]
    cal_runs: dict[str, list[tuple[list[str], dict]]] = {p.trace: [] for p in pieces}  # per trace: (recordings, client)
    cal_names: list[tuple[list[str], Path]] = []  # every calibration run: (recordings, where its files are)

    def calibration_run(piece: Slice, name: str) -> None:
        cal = piece.calibration()
        records = [str(out / f"{piece.trace}-{name}-replica{i}.etrec") for i in range(REPLICAS)]
        log(f"{piece.trace}: calibration run on {cal.window} s (round_robin)")
        client = serve(args, router, "round_robin", engine_args, records, out / f"{piece.trace}-{name}", cal)
        cal_runs[piece.trace].append((records, client))
        cal_names.append((records, out / f"{piece.trace}-{name}"))

    for piece in pieces:
        calibration_run(piece, "cal")
    served_runs = {}  # per (slice, policy): per repeat, the clients' figures, requests per replica, recordings
    for piece in pieces:
        for policy in args.policies:
            runs, counts, replica_records = [], [], []
            for rep in range(args.repeats):
                log(
                    f"{piece.trace}: {piece.window} s, {policy}"
                    + (f", run {rep + 1} of {args.repeats}" if args.repeats > 1 else "")
                )
                name = f"{piece.trace}-{policy}" + (f"-run{rep + 1}" if args.repeats > 1 else "")
                records = [str(out / f"{name}-replica{i}.etrec") for i in range(REPLICAS)]
                record = serve(args, router, policy, engine_args, records, out / name, piece)
                runs.append(measured_figures(record))
                counts.append([served(r) for r in records])
                replica_records.append(records)
            served_runs[piece, policy] = (runs, counts, replica_records, record["workload"]["num_prompts"])
    if args.calibrate_after:  # the machine drifts over a sitting: calibrate on both sides of the tested runs
        for piece in pieces:
            calibration_run(piece, "cal-after")
    every_cal = [records for runs in cal_runs.values() for records, _ in runs]
    # each replica's own fit: the two cores of this VM run the same steps at speeds up to 20% apart
    fits = [calibrate_from_recording([records[i] for records in every_cal]) for i in range(REPLICAS)]
    fit_paths = [str(out / f"fit-replica{i}.json") for i in range(REPLICAS)]
    for i, (fit, path) in enumerate(zip(fits, fit_paths)):
        fit.save(path)
        log(f"fit on replica {i}: R^2 {fit.info.r2:.3f}, mean error {fit.info.mean_abs_error_pct:.1f}% on its steps")
    # the replicas share this machine: each fit's scale with the other replica idle, and the slowdown beside it
    scales = {}  # per trace, per calibration run, per replica: (scale alone, slowdown beside a busy replica, steps)
    for trace, runs in cal_runs.items():
        scales[trace] = []
        for records, _ in runs:
            try:
                scales[trace].append(shared_host_slowdown(records, fits))
            except ValueError as exc:  # a calibration run without steps alone or without steps side by side
                log(f"{trace}: no shared-host slowdown from a calibration run: {exc}")
                scales[trace].append([(1.0, 0.0, 0)] * REPLICAS)
    every_scale = [run for runs in scales.values() for run in runs]
    alone = [float(np.mean([run[i][0] for run in every_scale])) for i in range(REPLICAS)]
    slowdown = max(float(np.mean([b for run in every_scale for _, b, _ in run])), 0.0)
    alone_paths = [str(out / f"fit-replica{i}-alone.json") for i in range(REPLICAS)]
    for fit, scale, path in zip(fits, alone, alone_paths):
        fit.scaled(scale, "its replica's neighbour idle (tools/fleet_accuracy.py)").save(path)
    log(
        "shared host: a step alone "
        + ", ".join(f"{a:.3f}" for a in alone)
        + f" x each replica's fit, {1 + slowdown:.3f} x that beside a busy replica"
    )
    fit_path, alone_path = ",".join(fit_paths), ",".join(alone_paths)  # `simulate --step-times`, per replica
    costs = front_end_costs(cal_names)
    if args.front_end_us_per_step is not None or args.front_end_us_per_token is not None:
        stream = (args.front_end_us_per_step or 0.0, args.front_end_us_per_token or 0.0)
        log(f"front-end streaming: {stream[0]:g} us a step, {stream[1]:g} us a token (given)")
    elif costs is None:
        stream = (0.0, 0.0)
        log("front-end streaming: its CPU was not measured in this sitting's calibration runs: left out")
    else:
        stream = (costs[0] * 1e6, costs[1] * 1e6)
        log(f"front-end CPU from the calibration runs: {stream[0]:.0f} us a step, {stream[1]:.0f} us a token")
    tokenize = {}  # per trace: ms a replica's front-end takes on a prompt cache_aware asks it to tokenize
    for piece in pieces:
        probe = out / f"{piece.trace}-router-tokenize-ms.json"  # what this sitting measured, for --again
        if args.router_tokenize_ms is not None:
            tokenize[piece.trace] = args.router_tokenize_ms
        elif args.again:
            tokenize[piece.trace] = json.loads(probe.read_text()) if probe.exists() else 0.0
        else:
            prompts = router_prompts(engine_args, piece.calibration())
            tokenize[piece.trace] = measure_router_tokenize_ms(engine_args, prompts)
            probe.write_text(json.dumps(tokenize[piece.trace]) + "\n")
        log(f"{piece.trace}: a router's tokenize call {tokenize[piece.trace]:.1f} ms of a replica's front-end")
    front_end = {}  # per trace: the served path its calibration runs measured, front-end ms a request
    front_end_one = {}  # the same, simulated without the shared host (the fit alone, as every step's price)
    for piece in pieces:
        cal = piece.calibration()
        target = float(np.mean([client["run"]["ttft_ms"]["p50"] for _, client in cal_runs[piece.trace]]))
        front_end[piece.trace] = front_end_ms(cal, target, alone_path, args.sim_model, slowdown, stream)
        front_end_one[piece.trace] = front_end_ms(cal, target, fit_path, args.sim_model, 0.0, stream)
        log(f"{piece.trace}: served path {front_end[piece.trace]:.1f} ms a request at the front-end")
    rows = []
    for (piece, policy), (runs, counts, replica_records, requests) in served_runs.items():
        trace = piece.trace
        measured = median_figures(runs)
        engine_only, _ = simulate_slice(piece, policy, alone_path, args.sim_model, 0.0, slowdown)
        simulated, sim_counts = simulate_slice(
            piece, policy, alone_path, args.sim_model, front_end[trace], slowdown, stream
        )
        one_host, _ = simulate_slice(piece, policy, fit_path, args.sim_model, front_end_one[trace], 0.0, stream)
        asked = tokenize[trace] if POLICIES[policy] == "cache-aware" else 0.0
        with_calls = (
            simulate_slice(piece, policy, alone_path, args.sim_model, front_end[trace], slowdown, stream, asked)[0]
            if asked
            else simulated
        )
        busiest = counts[0].index(max(counts[0]))
        rows.append(
            {
                "trace": trace,
                "window": piece.window,
                "time_scale": piece.time_scale,
                "policy": policy,
                "requests": requests,
                "measured": measured,
                "measured_runs": runs,
                "simulated": simulated,
                "error_pct": compare(measured, simulated),
                "front_end_ms": front_end[trace],
                "router_tokenize_ms": asked,
                "with_router_tokenize": {"simulated": with_calls, "error_pct": compare(measured, with_calls)},
                "without_served_path": {"simulated": engine_only, "error_pct": compare(measured, engine_only)},
                "without_shared_host": {"simulated": one_host, "error_pct": compare(measured, one_host)},
                "replica_requests": {"measured": counts[0], "simulated": sim_counts},
                "engine": {"replica": busiest, **engine_side(replica_records[0][busiest], fit_paths[busiest])},
                "decode_steps": decode_steps(replica_records[0][busiest], fit_paths[busiest]),
            }
        )
        log(f"{trace}, {policy}: " + row_line(rows[-1]))
    fitted = {
        "r2": [fit.info.r2 for fit in fits],
        "mean_abs_error_pct": [fit.info.mean_abs_error_pct for fit in fits],
        "coefficients": [fit.coefficients for fit in fits],
        "decode_steps": {trace: decode_steps(runs[0][0][0], fit_paths[0]) for trace, runs in cal_runs.items()},
    }
    shared = {
        "alone": alone,
        "slowdown": slowdown,
        "steps": sum(n for run in every_scale for _, _, n in run),
        # per trace, per calibration run in order (before the tested runs, then after with --calibrate-after):
        # each replica's steps alone over the sitting's fit, which shows the machine's drift over the sitting
        "alone_per_calibration_run": {
            trace: [[a for a, _, _ in run] for run in runs] for trace, runs in scales.items()
        },
    }
    return {
        "fit": fitted,
        "shared_host": shared,
        "front_end_ms": front_end,
        "front_end_ms_without_shared_host": front_end_one,
        "front_end_stream_us": list(stream),  # [a step, a token] in each front-end's queue
        # the front-ends' CPU in the calibration runs, fitted: [seconds a step, seconds a token] (None: not measured)
        "front_end_cpu": list(costs) if costs is not None else None,
        "rows": rows,
        "summary": summarize(rows),
    }


def summarize(rows: list[dict]) -> dict:
    """MAPE per trace and policy, per trace, overall; cache-aware's gain over round-robin per trace."""
    per_run = {f"{r['trace']} {r['policy']}": mape(list(r["error_pct"].values())) for r in rows}
    per_trace = {
        t: mape([e for r in rows if r["trace"] == t for e in r["error_pct"].values()])
        for t in {r["trace"] for r in rows}
    }
    gains = {}
    for trace in {r["trace"] for r in rows}:
        by_policy = {r["policy"]: r for r in rows if r["trace"] == trace}
        if "round_robin" in by_policy and "cache_aware" in by_policy:
            rr, ca = by_policy["round_robin"], by_policy["cache_aware"]
            gains[trace] = {
                name: {side: gain(rr[side][name], ca[side][name]) for side in ("measured", "simulated")}
                for name in ("TTFT p50", "E2E p50")
            }
            if len(rr.get("measured_runs", [])) > 1 and len(ca.get("measured_runs", [])) > 1:
                for name, g in gains[trace].items():  # the least and the most any pair of the runs shows
                    pairs = [gain(a[name], b[name]) for a in rr["measured_runs"] for b in ca["measured_runs"]]
                    g["measured_range"] = [min(pairs), max(pairs)]
    overall = mape([e for r in rows for e in r["error_pct"].values()])
    repeated = [r for r in rows if len(r.get("measured_runs", [])) > 1]
    repeatability = {  # the measurement against itself: repeated runs' spread, and the simulation inside it
        f"{r['trace']} {r['policy']}": {
            "runs": len(r["measured_runs"]),
            "spread_pct": spread_pct(r["measured_runs"]),
            "simulated_within_runs": [
                name
                for name, (low, high) in run_range(r["measured_runs"]).items()
                if low <= r["simulated"][name] <= high
            ],
        }
        for r in repeated
    }
    engine_only, one_host, with_calls = (
        {t: mape([e for r in rows if r["trace"] == t for e in r.get(part, r)["error_pct"].values()]) for t in per_trace}
        for part in ("without_served_path", "without_shared_host", "with_router_tokenize")
    )
    return {
        "mape_per_run": per_run,
        "mape_per_trace": per_trace,
        "mape": overall,
        "mape_per_trace_without_served_path": engine_only,
        "mape_per_trace_without_shared_host": one_host,
        "mape_per_trace_with_router_tokenize": with_calls,
        "cache_aware_gain_pct": gains,
        "repeatability": repeatability,
    }


def row_line(row: dict) -> str:
    return ", ".join(
        f"{name} {row['measured'][name]:.1f} -> {row['simulated'][name]:.1f} ms ({row['error_pct'][name]:+.1f}%)"
        for name, _, _ in FIGURES
    )


def decode_line(batches: dict[str, list[float]]) -> str:
    return ", ".join(f"{b}: {m:.2f} -> {p:.2f} ({n:g})" for b, (m, p, n) in batches.items())


def report(results: dict) -> str:
    """The results as a Markdown table, then the MAPE and the gains."""
    lines = [
        "| trace (window, scale) | policy | requests (per replica: measured / simulated) | "
        + " | ".join(f"{name}: measured → simulated" for name, _, _ in FIGURES)
        + " | MAPE |",
        "| --- | --- | --- | " + " | ".join("---" for _ in FIGURES) + " | --- |",
    ]
    for r in results["rows"]:
        counts = r["replica_requests"]
        runs = r.get("measured_runs", [])
        ranges = run_range(runs) if len(runs) > 1 else {}
        cells = [
            f"{r['measured'][n]:.1f}"
            + (f" ({ranges[n][0]:.1f}-{ranges[n][1]:.1f})" if ranges else "")
            + f" → {r['simulated'][n]:.1f} ms ({r['error_pct'][n]:+.1f}%)"
            for n, _, _ in FIGURES
        ]
        lines.append(
            f"| {r['trace']} ({r['window']} s, x{r['time_scale']:g}) | {r['policy']} | {r['requests']} "
            f"({'/'.join(map(str, counts['measured']))} / {'/'.join(map(str, counts['simulated']))}) | "
            + " | ".join(cells)
            + f" | {mape(list(r['error_pct'].values())):.1f}% |"
        )
    engine = [r for r in results["rows"] if "engine" in r]
    if engine:
        lines += ["", "the busiest replica as its engine saw it (its recording; simulated alone with the fit):"]
        for r in engine:
            figures = {name: value for name, value in r["engine"].items() if name != "replica"}
            lines.append(
                f"  {r['trace']} {r['policy']}, replica {r['engine']['replica']}: "
                + ", ".join(f"{name} {m:.1f} -> {p:.1f} ms" for name, (m, p) in figures.items())
                + f" (at the client: TTFT p50 {r['measured']['TTFT p50']:.1f} ms)"
            )
    steps = [r for r in results["rows"] if r.get("decode_steps")]
    if steps:
        lines += ["", "decode steps by requests decoding, median start to start -> the fit's price, ms (steps):"]
        calibrated = results.get("fit", {}).get("decode_steps", {})
        for trace, batches in sorted(calibrated.items()):
            lines.append(f"  {trace} calibration, replica 0: {decode_line(batches)}")
        for r in steps:
            lines.append(
                f"  {r['trace']} {r['policy']}, replica {r['engine']['replica']}: {decode_line(r['decode_steps'])}"
            )
    s = results["summary"]
    lines.append("")
    lines.append(
        f"MAPE {s['mape']:.1f}% over every figure (target {TARGET_PCT:g}%); per trace: "
        + ", ".join(f"{t} {v:.1f}%" for t, v in sorted(s["mape_per_trace"].items()))
    )
    front_end = results.get("front_end_ms", {})
    if front_end:
        lines.append(
            "served path (front-end ms a request) from each trace's calibration run: "
            + ", ".join(f"{t} {v:.1f} ms" for t, v in sorted(front_end.items()))
            + "; without it (the engine's view) MAPE per trace: "
            + ", ".join(f"{t} {v:.1f}%" for t, v in sorted(s["mape_per_trace_without_served_path"].items()))
        )
    asked = {r["trace"]: r["router_tokenize_ms"] for r in results["rows"] if r.get("router_tokenize_ms")}
    if asked:
        lines.append(
            "with cache_aware's tokenize call on every replica before it routes a request (measured on a replica "
            "alone: "
            + ", ".join(f"{t} {v:.1f} ms" for t, v in sorted(asked.items()))
            + "; simulate --router-tokenize-ms), MAPE per trace: "
            + ", ".join(f"{t} {v:.1f}%" for t, v in sorted(s["mape_per_trace_with_router_tokenize"].items()))
        )
    stream = results.get("front_end_stream_us")
    if stream and any(stream):
        lines.append(
            f"front-end streaming, in each replica's front-end queue: {stream[0]:.0f} us a step, {stream[1]:.0f} us a "
            + ("token (its CPU in the calibration runs, fitted)" if results.get("front_end_cpu") else "token (given)")
        )
    shared = results.get("shared_host")
    if shared:
        lines.append(
            f"shared host, from the calibration runs' {shared['steps']} busy steps: a step with the other replica "
            f"idle {' / '.join(f'{a:.3f}' for a in np.atleast_1d(shared['alone']))} x its replica's fit's price, "
            f"beside a busy one {1 + shared['slowdown']:.3f} x that; "
            "without it (the fit's price for every step) MAPE per trace: "
            + ", ".join(f"{t} {v:.1f}%" for t, v in sorted(s["mape_per_trace_without_shared_host"].items()))
        )
    drift = {t: runs for t, runs in (shared or {}).get("alone_per_calibration_run", {}).items() if len(runs) > 1}
    for trace, runs in sorted(drift.items()):
        lines.append(
            f"{trace} calibration runs, before and after the tested runs: steps alone "
            + " then ".join("/".join(f"{a:.3f}" for a in run) for run in runs)
            + " x each replica's fit"
        )
    for trace, figures in sorted(s["cache_aware_gain_pct"].items()):
        lines.append(
            f"cache_aware over round_robin on {trace}: "
            + ", ".join(
                f"{name} {g['measured']:+.1f}% measured"
                + (
                    f" ({g['measured_range'][0]:+.1f}% to {g['measured_range'][1]:+.1f}% between runs)"
                    if "measured_range" in g
                    else ""
                )
                + f", {g['simulated']:+.1f}% simulated"
                for name, g in figures.items()
            )
        )
    for run, rep in sorted(s.get("repeatability", {}).items()):
        lines.append(
            f"{run}, {rep['runs']} runs: spread (highest - lowest) / median "
            + ", ".join(f"{name} {v:.0f}%" for name, v in rep["spread_pct"].items())
            + f"; simulated within the runs' range: {', '.join(rep['simulated_within_runs']) or 'none'}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", help="folder for the recordings, fits, bench records and results")
    parser.add_argument(
        "--policies", nargs="+", default=["round_robin", "cache_aware", "power_of_two"], choices=POLICIES
    )
    parser.add_argument("--traces", nargs="+", default=list(TRACES), choices=TRACES)
    parser.add_argument("--azure-window", default="0:60", help="the Azure slice tested, seconds (default 0:60)")
    parser.add_argument("--mooncake-window", default="0:60", help="the Mooncake slice tested, seconds (default 0:60)")
    parser.add_argument("--time-scale", type=float, default=1.0, help="arrivals this many times as fast (default 1)")
    parser.add_argument(
        "--repeats", type=int, default=1, help="serve each slice and policy this many times on fresh fleets (default 1)"
    )
    parser.add_argument("--timeout-s", type=float, default=300.0, help="most seconds a run may take (default 300)")
    parser.add_argument(
        "--router-venv",
        default=str(Path(__file__).resolve().parents[2] / "router-venv"),
        help="virtual environment of vllm-router (default: router-venv beside the checkout)",
    )
    parser.add_argument(
        "--calibrate-after",
        action="store_true",
        help="serve each trace's calibration window again after the tested runs and fit on both calibration runs "
        "(the machine drifts over a sitting)",
    )
    parser.add_argument(
        "--front-end-us-per-step",
        type=float,
        default=None,
        metavar="US",
        help="simulate each front-end taking in a step's outputs in US (default: measured on the calibration runs "
        "with the per-token time: the front-end processes' CPU against the steps and tokens they streamed)",
    )
    parser.add_argument(
        "--front-end-us-per-token",
        type=float,
        default=None,
        metavar="US",
        help="simulate each front-end streaming a token in US (default: measured, as above; a sitting from before "
        "that measure streams nothing unless given these two)",
    )
    parser.add_argument(
        "--router-tokenize-ms",
        type=float,
        default=None,
        metavar="MS",
        help="also simulate cache_aware's tokenize call on every replica taking MS of its front-end, and print that "
        "MAPE (default: measured on a replica alone with each trace's calibration prompts; with --again, what the "
        "sitting measured, else 0: not simulated)",
    )
    parser.add_argument("--save", action="store_true", help="also write the results record to results/checks/")
    parser.add_argument(
        "--again",
        action="store_true",
        help="serve nothing: simulate again what a sitting with the same flags left in OUT (its recordings and "
        "bench records), e.g. after a change to the simulator",
    )
    args, engine_args = parser.parse_known_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # `kill` / `timeout` too stop every process started
    from enginetui.core.models.loader import resolve_model_dir

    model = engine_args[engine_args.index("--model") + 1] if "--model" in engine_args else None
    args.sim_model = str(resolve_model_dir(model, need_weights=False) or model)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = datetime.datetime.now(datetime.UTC)
    results = sitting(args, engine_args)
    results["args"] = vars(args) | {"engine_args": engine_args}
    results["command"] = shlex.join(
        ["python", "tools/fleet_accuracy.py", *(argv if argv is not None else sys.argv[1:])]
    )
    results["started_utc"] = started.isoformat(timespec="seconds")
    (out / "fleet_accuracy.json").write_text(json.dumps(results, indent=1) + "\n")
    print(report(results))
    if args.save:
        from enginetui.bench import saved_result

        results |= {"machine": saved_result.machine(), "source": saved_result.source()}
        name = saved_result.slug(f"{started:%Y-%m-%d-%H%M}", results["machine"]["label"], "fleet-accuracy")
        path = Path("results/checks") / f"{name}.json"
        path.write_text(json.dumps(results, indent=1) + "\n")
        print(f"results record written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
