"""`simulate(...)`: one simulated run from plain arguments, the Python side of `enginetui simulate`.

from enginetui.simulate import simulate
result = simulate(model="llama-3.1-8b", hardware="h200", dataset="random", num_prompts=200,
                  request_rate=10, max_num_seqs=128)
print(result.summary.ttft.p99, result.summary.output_throughput)
"""

import math
from dataclasses import dataclass, field

from enginetui.core.ceil_div import cdiv
from enginetui.core.config import EngineConfig
from enginetui.core.engine.kv_sizing import DEFAULT_GPU_MEMORY_UTILIZATION, blocks_in_budget, gib
from enginetui.latency_figures import parse_slos
from enginetui.simulate import from_settings
from enginetui.simulate.from_recording import recorded_run
from enginetui.simulate.memory import PoolSizing, size_pool
from enginetui.simulate.model_shape import ModelShape
from enginetui.simulate.simulator import SimRun, Simulator, add_served_path
from enginetui.simulate.step_time import StepTimeModel
from enginetui.simulate.summary import Summary, summarize


@dataclass(slots=True)
class SimSettings:
    """Everything a simulated run is made of besides the engine flags."""

    model: str = "llama-3.1-8b"  # shipped config name, HF directory or config.json
    hardware: str = "h200"  # accelerator (roofline model and memory); a fleet's per replica: "h200*2,h100*2"
    tensor_parallel_size: int = 1  # GPUs the model is split over
    weight_dtype: str = "bf16"  # bf16, fp16 or fp8 weights
    kv_cache_dtype: str = "auto"  # auto (16-bit) or fp8 KV cache
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION  # share of device memory vLLM may use (its default)
    step_times: str = "roofline"  # "roofline", "recorded" (with from_recording), a --calibrate file; or per replica
    mfu: float | None = None  # roofline compute efficiency (None: the default)
    mbu: float | None = None  # roofline bandwidth efficiency (None: the default)
    overhead_ms: float | None = None  # roofline fixed milliseconds per step (None: the default)
    dataset: str = "random"  # random, sharegpt, shared-prefix, azure-conv or mooncake (ignored with from_recording)
    trace: str | None = None  # a trace file (Azure, BurstGPT or Mooncake format) to serve instead of a dataset
    trace_window: str | None = None  # traces: "START:END" seconds of the trace to serve (None: all of it)
    time_scale: float = 1.0  # traces: arrivals this many times as fast (2: twice the rate)
    over_context: str = "clip"  # traces: requests longer than max_model_len are "clip"ped or "skip"ped
    replicas: int = 1  # engines behind the router (each its own scheduler, KV pool and clock)
    router: str = "cache-aware"  # with replicas > 1: how requests are spread (routers.ROUTERS; vllm-router's default)
    prefill_replicas: int = 0  # disaggregated prefill: engines of the prefill pool (0: not disaggregated)
    decode_replicas: int = 0  # disaggregated prefill: engines of the decode pool
    prefill_policy: str | None = None  # the prefill pool's router (None: `router`)
    decode_policy: str | None = None  # the decode pool's router (None: `router`)
    kv_transfer_bandwidth: float = 50.0  # disaggregated prefill: GB/s of the link a prompt's KV crosses
    front_end_ms: float = 0.0  # the served path: ms a request, one at a time, per engine, before the engine takes it
    front_end_us_per_token: float = 0.0  # the served path: µs a sampled token to stream, in the same queue
    front_end_us_per_step: float = 0.0  # the served path: µs to take in a step's outputs, in the same queue
    router_tokenize_ms: float = 0.0  # the served path: ms a front-end takes on a prompt the router asks it to tokenize
    shared_host_slowdown: float = 0.0  # replicas on one machine: a step this much longer while the others are busy
    num_prompts: int = 1000  # requests
    input_len: int = 1024  # random / shared-prefix: mean prompt (distinct part) length
    output_len: int = 128  # random / shared-prefix: mean output length
    range_ratio: float = 0.0  # random / shared-prefix: lengths drawn from [len*(1-r), len*(1+r)]
    prefix_len: int = 512  # shared-prefix: tokens of each shared prefix
    num_prefixes: int = 4  # shared-prefix: distinct prefixes
    tokenizer: str | None = None  # sharegpt: tokenizer directory or "embedded"; None: UTF-8 bytes / 4
    from_recording: str | None = None  # a recording whose arrivals and lengths to serve
    request_rate: float = math.inf  # requests per second (inf: all at once)
    burstiness: float = 1.0  # gamma shape of the gaps (1: Poisson)
    burst_size: int = 1  # requests arriving together
    seed: int = 0  # workload and arrivals
    goodput: str | None = None  # SLOs, "ttft:500 tpot:50" (milliseconds)
    record: str | None = None  # write the run as a recording here
    progress: bool = False  # a progress bar on stderr


@dataclass(slots=True)
class SimResult:
    """One simulated run: its figures and where they came from."""

    summary: Summary  # the figures
    run: SimRun  # per request and per step
    settings: SimSettings  # what was simulated
    config: EngineConfig  # the engine flags in force
    num_blocks: int  # KV pool size
    pool: PoolSizing | None  # how the pool was sized from memory (None: given, or the recording's)
    step_model: str  # the step-time model's name
    notes: list[str] = field(default_factory=list)  # things the reader should know
    fleet: "FleetResult | None" = None  # per replica, when several were simulated


@dataclass(slots=True)
class FleetResult:
    """A fleet's replicas: each one's figures (the result's summary is the whole fleet's)."""

    router: str  # the router's name
    summaries: list[Summary]  # per replica
    runs: list[SimRun]  # per replica
    choices: list[int]  # per request (by arrival): the replica it went to (disaggregated: its prefill replica)
    roles: list[str] = field(default_factory=list)  # per replica: "replica", or "prefill" / "decode"
    transfer_seconds: list[float] = field(default_factory=list)  # disaggregated: per request its KV transfer
    num_blocks: list[int] = field(default_factory=list)  # per replica: its KV pool


def simulate(settings: SimSettings | None = None, *, live=None, **kwargs) -> SimResult:
    """Simulate one run. Keywords are SimSettings fields or engine flags (EngineConfig fields, e.g.
    max_num_seqs=128, enable_prefix_caching=True, num_gpu_blocks_override=4096). `live(info, source)`:
    an EventSink that is handed each step event as it is built (`--watch`)."""
    settings_fields = set(SimSettings.__dataclass_fields__)
    s = settings or SimSettings()
    s = SimSettings(**{**_asdict(s), **{k: v for k, v in kwargs.items() if k in settings_fields}})
    flags = {k: v for k, v in kwargs.items() if k not in settings_fields}
    notes: list[str] = []
    check_fleet(s)
    mixed = mixed_fleet(s)  # per replica its settings, when their hardware or step times differ
    base = mixed[0] if mixed else s
    if s.from_recording:
        _check_recorded_workload(s)
        recorded = recorded_run(s.from_recording)
        flags = {**_config_fields(recorded.config), **flags}
        flags.setdefault("num_gpu_blocks_override", recorded.num_blocks)
        flags.setdefault("max_model_len", recorded.max_model_len)
        requests = recorded.requests
        if recorded.num_partial:
            notes.append(
                f"{recorded.num_partial} recorded requests were aborted or unfinished: they stop after "
                f"the tokens they had generated"
            )
    step_model, shape, implied = from_settings.step_model(base, recorded.steps if s.from_recording else None)
    config = _engine_config({**implied, **flags})
    max_model_len = config.max_model_len or (shape.max_position_embeddings if shape else 2048)
    if not s.from_recording:
        requests = from_settings.make_workload(s, shape.vocab_size if shape else 32000, max_model_len, notes)
    num_blocks, pool = _kv_pool(base, shape, config, max_model_len, notes)
    models: StepTimeModel | list[StepTimeModel] = step_model
    pools: int | list[int] = num_blocks
    if mixed:  # each replica its own step-time model and pool, made once for each kind of replica
        kinds = {(base.hardware, base.step_times): (step_model, num_blocks)}
        for replica in mixed:
            if (replica.hardware, replica.step_times) not in kinds:
                model, _, its_flags = from_settings.step_model(replica, None)
                blocks = _kv_pool(replica, shape, _engine_config({**its_flags, **flags}), max_model_len, [])[0]
                kinds[replica.hardware, replica.step_times] = (model, blocks)
        models = [kinds[r.hardware, r.step_times][0] for r in mixed]
        pools = [kinds[r.hardware, r.step_times][1] for r in mixed]
    if not s.from_recording:  # a recording keeps its rejections
        _check_fits(requests, min(pools) if isinstance(pools, list) else pools, config.block_size)
    from enginetui.simulate.progress import progress_bar

    if fleet_roles(s):
        return _simulate_fleet(s, config, shape, pools, max_model_len, models, requests, pool, notes, live)
    writer = from_settings.event_writer(s, config, shape, num_blocks, max_model_len, step_model.name, live)
    try:
        with progress_bar(len(requests), s.progress) as progress:
            simulator = Simulator(
                config,
                num_blocks,
                max_model_len,
                step_model,
                writer,
                front_end_seconds=s.front_end_ms / 1e3,
                front_end_token_seconds=s.front_end_us_per_token / 1e6,
                front_end_step_seconds=s.front_end_us_per_step / 1e6,
            )
            run = simulator.run(requests, progress)
    finally:
        if writer is not None:
            writer.close()
    summary = summarize(run, parse_slos(s.goodput))
    return SimResult(summary, run, s, config, num_blocks, pool, step_model.name, notes)


def _kv_pool(
    s: SimSettings, shape: ModelShape | None, config: EngineConfig, max_model_len: int, notes: list[str]
) -> tuple[int, PoolSizing | None]:
    """The engine's KV pool in blocks, and how it was sized from memory (None: given)."""
    num_blocks = config.num_gpu_blocks_override
    if num_blocks is None and config.kv_cache_memory_bytes is not None:  # the engine's rule, per GPU
        num_blocks = _given_memory_blocks(s, shape, config)
        notes.append(
            f"KV pool: --kv-cache-memory-bytes {gib(config.kv_cache_memory_bytes)} per GPU holds "
            f"{num_blocks} blocks (weights and activations not checked against the device)"
        )
    if num_blocks is not None:
        return num_blocks, None
    pool = _pool(s, shape, config)
    if pool.num_blocks * config.block_size < max_model_len:
        raise ValueError(
            f"the KV pool holds {pool.num_blocks * config.block_size} tokens, fewer than max_model_len "
            f"{max_model_len} (vLLM refuses to start so): lower --max-model-len, or give the cache more "
            f"memory ({pool.describe()})"
        )
    return pool.num_blocks, pool


def per_replica(flag: str, text: str, replicas: int) -> list[str]:
    """A fleet's value per replica: "a" for all, or "a,b,c" one each, "a*2,b*2" repeated; refused unless it
    names exactly `replicas` values."""
    values = []
    for part in text.split(","):
        name, star, times = part.strip().partition("*")
        if not name or (star and not (times.isdigit() and int(times) > 0)):
            raise ValueError(f"{flag} {text!r}: write one value for every replica, or VALUE*COUNT (h200*2,h100*2)")
        values += [name] * (int(times) if star else 1)
    if len(values) > 1 and len(values) != replicas:
        raise ValueError(f"{flag} {text!r} names {len(values)} replicas: the fleet has {replicas} (--replicas)")
    return values * replicas if len(values) == 1 else values


def mixed_fleet(s: SimSettings) -> list[SimSettings]:
    """Per replica its settings, its own hardware and step times (`per_replica`), when the fleet's differ;
    empty when they are alike."""
    from dataclasses import replace

    if "," not in s.hardware + s.step_times and "*" not in s.hardware + s.step_times:
        return []
    if s.replicas < 2 or s.prefill_replicas:
        raise ValueError("a --hardware or --step-times per replica is for a fleet of --replicas N (N > 1)")
    hardware = per_replica("--hardware", s.hardware, s.replicas)
    step_times = per_replica("--step-times", s.step_times, s.replicas)
    return [replace(s, hardware=h, step_times=t) for h, t in zip(hardware, step_times)]


def fleet_models(s: SimSettings) -> list[str]:
    """A mixed fleet's replicas, each by what it runs on: its hardware (a roofline) or its fit's file name; empty
    for a fleet of alike replicas."""
    from pathlib import Path

    return [r.hardware if r.step_times == "roofline" else Path(r.step_times).name for r in mixed_fleet(s)]


def check_fleet(s: SimSettings) -> None:
    """Bad fleet settings, refused before anything runs."""
    from enginetui.simulate.routers import POLICIES, ROUTERS

    if s.replicas < 1:
        raise ValueError(f"--replicas must be at least 1, got {s.replicas}")
    if not s.front_end_ms >= 0:
        raise ValueError(f"--front-end-ms must be non-negative, got {s.front_end_ms:g}")
    if not s.front_end_us_per_token >= 0:
        raise ValueError(f"--front-end-us-per-token must be non-negative, got {s.front_end_us_per_token:g}")
    if not s.front_end_us_per_step >= 0:
        raise ValueError(f"--front-end-us-per-step must be non-negative, got {s.front_end_us_per_step:g}")
    if (s.front_end_us_per_token or s.front_end_us_per_step) and s.prefill_replicas:
        raise ValueError(
            "--front-end-us-per-token / --front-end-us-per-step: not for prefill and decode pools (their front-end "
            "takes requests only)"
        )
    if not s.shared_host_slowdown >= 0:
        raise ValueError(f"--shared-host-slowdown must be non-negative, got {s.shared_host_slowdown:g}")
    if not s.router_tokenize_ms >= 0:
        raise ValueError(f"--router-tokenize-ms must be non-negative, got {s.router_tokenize_ms:g}")
    if s.shared_host_slowdown and (s.replicas < 2 or s.prefill_replicas):
        raise ValueError("--shared-host-slowdown: only for a fleet of --replicas N (N > 1)")
    if s.router not in ROUTERS:
        raise ValueError(f"--router {s.router!r}: no such router (choose one of {', '.join(ROUTERS)})")
    if s.router_tokenize_ms and (s.prefill_replicas or s.replicas < 2 or not POLICIES[s.router].asks_replicas):
        asking = ", ".join(name for name, cls in POLICIES.items() if cls.asks_replicas)
        raise ValueError(f"--router-tokenize-ms: only for a fleet of --replicas N behind --router {asking}")
    if s.prefill_replicas or s.decode_replicas:
        if s.prefill_replicas < 1 or s.decode_replicas < 1:
            raise ValueError(
                f"--prefill-replicas {s.prefill_replicas} --decode-replicas {s.decode_replicas}: a disaggregated "
                f"fleet needs at least one of each"
            )
        if s.replicas != 1:
            raise ValueError("--replicas: a disaggregated fleet is --prefill-replicas P --decode-replicas D")
        if not s.kv_transfer_bandwidth > 0:
            raise ValueError(f"--kv-transfer-bandwidth must be positive (GB/s), got {s.kv_transfer_bandwidth:g}")
    for flag, policy in (("--prefill-policy", s.prefill_policy), ("--decode-policy", s.decode_policy)):
        if policy is not None and not s.prefill_replicas:
            raise ValueError(f"{flag}: only for a disaggregated fleet (give --prefill-replicas and --decode-replicas)")
        if policy is not None and policy not in ROUTERS:
            raise ValueError(f"{flag} {policy!r}: no such router (choose one of {', '.join(ROUTERS)})")
    if fleet_roles(s) and s.from_recording:
        raise ValueError("--from-recording simulates the recorded engine: leave out --replicas")


def fleet_router(s: SimSettings) -> str:
    """The fleet's router in words: `cache-aware`, or `prefill cache-aware, decode round-robin`."""
    if s.prefill_replicas:
        return f"prefill {s.prefill_policy or s.router}, decode {s.decode_policy or s.router}"
    return s.router


def fleet_roles(s: SimSettings) -> list[str]:
    """The fleet's engines' roles: "replica" each, or "prefill" then "decode" ones; empty for one engine."""
    if s.prefill_replicas:
        return ["prefill"] * s.prefill_replicas + ["decode"] * s.decode_replicas
    return ["replica"] * s.replicas if s.replicas > 1 else []


def _simulate_fleet(
    s: SimSettings,
    config: EngineConfig,
    shape,
    num_blocks: int | list[int],
    max_model_len: int,
    step_model: StepTimeModel | list[StepTimeModel],
    requests,
    pool,
    notes,
    live,
) -> SimResult:
    """A fleet's run: alike replicas, or per replica its `num_blocks` and `step_model` (a mixed fleet, never
    disaggregated: mixed_fleet)."""
    from enginetui.simulate.fleet import merged_run, run_fleet
    from enginetui.simulate.fleet_events import FleetEvents
    from enginetui.simulate.progress import progress_bar
    from enginetui.simulate.routers import make_router

    roles = fleet_roles(s)
    models = step_model if isinstance(step_model, list) else [step_model]
    pools = num_blocks if isinstance(num_blocks, list) else [num_blocks] * len(roles)
    step_times = "; ".join(dict.fromkeys(m.name for m in models))
    writer = from_settings.event_writer(
        s, config, shape, pools[0], max_model_len, step_times, live, roles, fleet_models(s)
    )
    events = FleetEvents(writer, len(roles)) if writer is not None else None
    try:
        with progress_bar(len(requests), s.progress) as progress:
            if s.prefill_replicas:
                fleet = _disaggregated(
                    s, config, shape, num_blocks, max_model_len, step_model, requests, progress, events
                )
                for replica_run in fleet.replicas:
                    add_served_path(replica_run, s.front_end_ms / 1e3)
            else:
                router = make_router(s.router, s.replicas, config.block_size, s.seed)
                fleet = run_fleet(
                    config,
                    num_blocks,
                    max_model_len,
                    step_model,
                    s.replicas,
                    router,
                    requests,
                    progress,
                    events=events,
                    front_end_seconds=s.front_end_ms / 1e3,
                    shared_host_slowdown=s.shared_host_slowdown,
                    front_end_token_seconds=s.front_end_us_per_token / 1e6,
                    front_end_step_seconds=s.front_end_us_per_step / 1e6,
                    router_tokenize_seconds=s.router_tokenize_ms / 1e3,
                )
    finally:
        if events is not None:
            events.close()
    slos = parse_slos(s.goodput)
    run = merged_run(fleet)
    replica_figures = [summarize(r, slos) for r in fleet.replicas]
    return SimResult(
        summarize(run, slos),
        run,
        s,
        config,
        pools[0],
        pool if len(set(pools)) == 1 else None,
        step_times,
        notes,
        FleetResult(
            fleet.router, replica_figures, fleet.replicas, fleet.choices, fleet.roles, fleet.transfer_seconds, pools
        ),
    )


def _disaggregated(s: SimSettings, config, shape, num_blocks, max_model_len, step_model, requests, progress, events):
    from enginetui.simulate.disagg import run_disaggregated
    from enginetui.simulate.memory import kv_block_bytes
    from enginetui.simulate.precision import kv_bytes
    from enginetui.simulate.routers import make_router

    if shape is None:
        raise ValueError("disaggregated prefill times the KV transfer by the model's KV size: give --model")
    # the whole model's KV of a token (every tensor-parallel rank's share)
    per_token = kv_block_bytes(shape, config.block_size, kv_bytes(s.kv_cache_dtype), 1) / config.block_size
    prefill = make_router(s.prefill_policy or s.router, s.prefill_replicas, config.block_size, s.seed)
    decode = make_router(s.decode_policy or s.router, s.decode_replicas, config.block_size, s.seed + 1)
    return run_disaggregated(
        config,
        num_blocks,
        max_model_len,
        step_model,
        prefill,
        decode,
        requests,
        per_token,
        s.kv_transfer_bandwidth * 1e9,
        progress,
        events,
    )


RECORDED_WORKLOAD = {  # settings a recording replaces, and their flags
    "dataset": "--dataset",
    "num_prompts": "--num-prompts",
    "input_len": "--random-input-len",
    "output_len": "--random-output-len",
    "range_ratio": "--random-range-ratio",
    "prefix_len": "--prefix-len",
    "num_prefixes": "--num-prefixes",
    "tokenizer": "--tokenizer",
    "request_rate": "--request-rate",
    "burstiness": "--burstiness",
    "burst_size": "--burst-size",
    "seed": "--seed",
    "trace": "--trace",
    "trace_window": "--trace-window",
    "time_scale": "--time-scale",
    "over_context": "--over-context",
}


def _check_recorded_workload(s: SimSettings) -> None:
    """A recording brings its own requests and arrivals: a workload setting beside it would be ignored."""
    default = SimSettings()
    given = [flag for name, flag in RECORDED_WORKLOAD.items() if getattr(s, name) != getattr(default, name)]
    if given:
        raise ValueError(
            f"{', '.join(given)}: not used with --from-recording, whose requests arrive as they were "
            f"recorded (leave them out)"
        )


def _asdict(s: SimSettings) -> dict:
    return {name: getattr(s, name) for name in SimSettings.__dataclass_fields__}


def _config_fields(config: EngineConfig) -> dict:
    from enginetui.simulate.from_recording import SCHEDULING_FIELDS

    return {name: getattr(config, name) for name in SCHEDULING_FIELDS}


def _engine_config(flags: dict) -> EngineConfig:
    known = set(EngineConfig.__dataclass_fields__)
    unknown = sorted(set(flags) - known)
    if unknown:
        raise ValueError(f"unknown simulate settings or engine flags: {', '.join(unknown)}")
    # async scheduling stated (off, the CPU default) so that resolving it does not import torch
    return EngineConfig(**{"device": "cpu", "async_scheduling": False, **flags})


def _pool(s: SimSettings, shape: ModelShape | None, config: EngineConfig) -> PoolSizing:
    from enginetui.simulate.hardware import accelerator
    from enginetui.simulate.precision import kv_bytes, weight_bytes

    if shape is None:
        raise ValueError("the KV pool size is unknown: give --num-gpu-blocks-override")
    return size_pool(
        shape,
        accelerator(s.hardware),
        s.tensor_parallel_size,
        weight_bytes(s.weight_dtype),
        kv_bytes(s.kv_cache_dtype),
        config.block_size,
        s.gpu_memory_utilization,
        config.max_num_batched_tokens,
        config.max_num_seqs,
    )


def _given_memory_blocks(s: SimSettings, shape: ModelShape | None, config: EngineConfig) -> int:
    from enginetui.simulate.memory import kv_block_bytes
    from enginetui.simulate.precision import kv_bytes

    if shape is None:
        raise ValueError("--kv-cache-memory-bytes needs the model's shape: give --num-gpu-blocks-override")
    block = kv_block_bytes(shape, config.block_size, kv_bytes(s.kv_cache_dtype), s.tensor_parallel_size)
    rule = f"--kv-cache-memory-bytes {gib(config.kv_cache_memory_bytes)}"
    return blocks_in_budget(config.kv_cache_memory_bytes, block, rule).num_blocks


def _check_fits(requests, num_blocks: int, block_size: int) -> None:
    """A pool that cannot hold some request of the workload is a mistake, not a result."""
    if not requests:
        raise ValueError("the workload has no requests")
    biggest = max(requests, key=lambda r: r.prompt_len + (r.max_tokens or r.output_len))
    tokens = biggest.prompt_len + (biggest.max_tokens or biggest.output_len) - 1
    need = cdiv(tokens, block_size)
    if need > num_blocks:
        raise ValueError(
            f"the KV pool ({num_blocks} blocks of {block_size} tokens) cannot hold request "
            f"{biggest.request_id} ({tokens} tokens, {need} blocks): raise the pool "
            f"(--num-gpu-blocks-override, --gpu-memory-utilization) or shorten the workload"
        )
