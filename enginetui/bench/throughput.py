"""`enginetui bench throughput`: offline throughput, like `vllm bench throughput`.

The whole workload goes to `LLM.generate` at once (random token-id prompts, ignore_eos, a fixed
output length per request) and is timed end to end. Options measure the step-event cost (the
engine with events off, on, or on with a live subscriber), the engine beside a competing load
(one busy process, or the live dashboard attached), what recording the events to a file costs,
and compare against Hugging Face `generate`
and vLLM's `LLM` on the same prompts and the same weights. Every pass starts from a cold prefix
cache. The engines take turns: each repeat runs a pass of every mode of ours, then of every vLLM
engine, so a drift of the machine (a noisy neighbour, memory bandwidth shared with other tenants)
hits them alike; the best of --repeats is kept, and every pass is listed so the spread shows.
"""

import argparse
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import psutil

from enginetui.bench import plot, report
from enginetui.bench.competing import Competitor, DashboardCost, competing, mode_label
from enginetui.bench.engines import bench_engine_kwargs, bench_workload, shared_weights
from enginetui.bench.event_counter import EventCounter, StepCounts
from enginetui.bench.frozen import frozen
from enginetui.bench.hf_baseline import HFRun, load_hf_model, run_hf
from enginetui.bench.process_cpu import cpu_seconds
from enginetui.bench.recording import event_modes, record_path
from enginetui.bench.vllm_peer import VLLM_COMPETING, VLLMPeer, vllm_engine_kwargs
from enginetui.bench.workload import WorkloadSpec, prompts_of, spec_from_args, total_output_len, warmup_workload
from enginetui.core import LLM, SamplingParams
from enginetui.core.record.recorder import RecordingSummary
from enginetui.simulate.workload import SimRequest
from enginetui.vllm_launch import vllm_python


@dataclass(slots=True)
class EngineRun:
    """One timed pass of our engine over the whole workload."""

    events: str  # off | on | subscriber | record
    competing: str  # none | busy | dashboard: what else ran during the pass
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
    dashboard: DashboardCost | None = None  # what the attached dashboard used (competing dashboard only)
    engine_cores: float | None = None  # EngineCore's CPU time over the pass / elapsed: the cores the OS gave it
    # (None when the engine runs in the bench's own process)

    @property
    def label(self) -> str:
        """The mode: events mode, plus the competing load if any (e.g. `on+busy`)."""
        return mode_label(self.events, self.competing)


@dataclass(slots=True)
class VLLMRun:
    """One timed pass of vLLM's `LLM.generate` over the whole workload."""

    cores: str  # default (vLLM's own binding) | all (the model on every core)
    competing: str  # none | busy
    repeat: int  # which pass (0-based)
    elapsed_s: float  # wall time of LLM.generate
    output_tokens: int  # tokens generated (checked equal to the workload's)
    requests_per_s: float  # requests / elapsed
    total_tokens_per_s: float  # (prompt + output tokens) / elapsed
    output_tokens_per_s: float  # output tokens / elapsed
    cached_prompt_tokens: int  # prompt tokens served from vLLM's prefix cache (the pass starts cold)

    @property
    def label(self) -> str:
        return mode_label(f"vllm-{self.cores}", self.competing)


@dataclass(slots=True)
class GreedyAgreement:
    """Greedy tokens of our engine against a peer's on the same weights (temperature 0 only)."""

    identical_requests: int  # requests whose whole output is the same token for token
    num_requests: int  # requests compared
    agreeing_token_share: float  # tokens before each request's first difference / all output tokens


@dataclass(slots=True)
class ThroughputResult:
    """Everything `bench throughput` measured (its --json)."""

    workload: WorkloadSpec  # how the requests were drawn
    prompt_tokens: int  # total prompt tokens of the workload
    output_tokens: int  # total output tokens of the workload
    temperature: float  # sampling temperature of every request (0: greedy)
    model: str  # the model asked for ("default": the embedded one)
    engine_args: dict[str, Any]  # the engine arguments used; our engine keeps its defaults otherwise
    device: str  # where it ran
    dtype: str  # compute dtype
    runs: list[EngineRun]  # every timed pass, in the order run
    best: dict[str, EngineRun]  # mode label -> its fastest pass
    reference: str  # the mode the ratios to peers and loads start from: events on (or the first asked), alone
    events_ratio: dict[str, float] = field(default_factory=dict)  # events mode -> output tok/s / events off
    record_ratio: float | None = None  # output tok/s recording / events on without recording (both run)
    recording: RecordingSummary | None = None  # what the record mode wrote
    competing_ratio: dict[str, float] = field(default_factory=dict)  # load -> output tok/s / alone (same events)
    hf_runs: list[HFRun] = field(default_factory=list)  # the baseline at each batch size tried
    hf_best: HFRun | None = None  # the baseline's fastest batch size
    hf_ratio: float | None = None  # our best output tok/s / the baseline's best
    vllm_version: str | None = None  # the peer's version, when compared
    vllm_runs: list[VLLMRun] = field(default_factory=list)  # every timed vLLM pass
    vllm_best: dict[str, VLLMRun] = field(default_factory=dict)  # vLLM label -> its fastest pass
    vllm_ratio: dict[str, float] = field(default_factory=dict)  # vLLM label -> ours / vLLM, same load
    vllm_agreement: GreedyAgreement | None = None  # greedy tokens against vLLM's (temperature 0)
    summary: str = ""  # the one-line summary printed last


@contextmanager
def our_engines(
    engine_kwargs: dict[str, Any], modes: list[str], temperature: float, record: str | None = None
) -> Iterator[dict[str, tuple[LLM, EventCounter | None]]]:
    """One warmed-up engine per events mode (with its event counter for the subscriber mode), shut
    down on exit. The `record` mode's engine records to the file `record` (warm-up and every pass)."""
    engines: dict[str, tuple[LLM, EventCounter | None]] = {}
    try:
        for mode in modes:
            llm = LLM(**engine_kwargs, enable_step_events=mode != "off", record=record if mode == "record" else None)
            engines[mode] = (llm, None)
            if mode == "subscriber":
                engines[mode] = (llm, EventCounter(llm.engine.client.events_address))
            warmup = warmup_workload(llm.engine.info.vocab_size)
            llm.generate(prompts_of(warmup), _params(warmup, temperature), use_tqdm=False)
        yield engines
    finally:
        for llm, counter in engines.values():
            if counter is not None:
                counter.close()
            llm.shutdown()


def our_pass(
    llm: LLM,
    counter: EventCounter | None,
    workload: list[SimRequest],
    mode: str,
    load: str,
    repeat: int,
    temperature: float,
) -> tuple[EngineRun, list[list[int]]]:
    """One timed pass of our engine beside the competing `load`."""
    client = llm.engine.client
    address = getattr(client, "events_address", None) if mode != "off" else None
    with competing(load, address, getattr(client, "engine_pid", None)) as competitor:
        run, tokens = time_engine(llm, counter, workload, mode, load, repeat, temperature, competitor)
    run.dashboard = competitor.cost
    return run, tokens


def time_engine(
    llm: LLM,
    counter: EventCounter | None,
    workload: list[SimRequest],
    mode: str,
    load: str,
    repeat: int,
    temperature: float,
    competitor: Competitor | None = None,
) -> tuple[EngineRun, list[list[int]]]:
    """One timed LLM.generate over the workload, from a cold prefix cache; the run and its tokens.

    `competitor` (the load running beside it) is stopped as soon as the pass ends.
    """
    engine = llm.engine
    engine.reset_prefix_cache()  # earlier passes must not serve this one's prompts
    first_step = engine.snapshot().step if counter is not None else 0
    prompts = prompts_of(workload)
    params = _params(workload, temperature)
    core_process = _engine_process(llm)
    cpu_start = cpu_seconds(core_process)
    start = time.perf_counter()
    outputs = llm.generate(prompts, params, use_tqdm=False)
    elapsed = time.perf_counter() - start
    engine_cores = (cpu_seconds(core_process) - cpu_start) / elapsed if core_process is not None else None
    if competitor is not None:
        competitor.stop()
    tokens = [list(o.outputs[0].token_ids) for o in outputs]
    output_tokens = sum(len(t) for t in tokens)
    expected = total_output_len(workload)
    if output_tokens != expected:
        raise RuntimeError(f"the engine generated {output_tokens} tokens, the workload asks for {expected}")
    steps = None
    if counter is not None:
        last_step = engine.snapshot().step
        counter.wait_for_step(last_step)
        steps = counter.counts(first_step, last_step)
    prompt_tokens = sum(len(p) for p in prompts)
    run = EngineRun(
        events=mode,
        competing=load,
        repeat=repeat,
        elapsed_s=elapsed,
        num_requests=len(workload),
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        requests_per_s=len(workload) / elapsed,
        total_tokens_per_s=(prompt_tokens + output_tokens) / elapsed,
        output_tokens_per_s=output_tokens / elapsed,
        cached_prompt_tokens=sum(o.num_cached_tokens for o in outputs),
        steps=steps,
        engine_cores=engine_cores,
    )
    return run, tokens


def _engine_process(llm: LLM) -> psutil.Process | None:
    """The EngineCore child process, or None when the engine runs in this process."""
    pid = getattr(llm.engine.client, "engine_pid", None)
    return psutil.Process(pid) if pid is not None else None


@contextmanager
def vllm_peers(
    python: str, model_dir: str, engine: dict[str, Any], cores_modes: list[str]
) -> Iterator[dict[str, VLLMPeer]]:
    """One warmed-up vLLM engine per cores mode, each in vLLM's own interpreter; closed on exit."""
    with ExitStack() as stack:
        yield {cores: stack.enter_context(VLLMPeer(python, model_dir, engine, cores)) for cores in cores_modes}


def vllm_pass(
    peer: VLLMPeer, workload: list[SimRequest], load: str, repeat: int, temperature: float
) -> tuple[VLLMRun, list[list[int]]]:
    """One timed pass of vLLM's LLM.generate beside the competing `load` (from a cold prefix cache)."""
    prompts = prompts_of(workload)
    output_lens = [r.output_len for r in workload]
    with competing(load):
        reply = peer.throughput(prompts, output_lens, temperature)
    tokens = reply["output_token_ids"]
    generated, expected = sum(len(t) for t in tokens), sum(output_lens)
    if generated != expected:
        raise RuntimeError(f"vLLM generated {generated} tokens, the workload asks for {expected}")
    elapsed = reply["elapsed_s"]
    run = VLLMRun(
        cores=peer.cores,
        competing=load,
        repeat=repeat,
        elapsed_s=elapsed,
        output_tokens=generated,
        requests_per_s=len(prompts) / elapsed,
        total_tokens_per_s=(sum(map(len, prompts)) + generated) / elapsed,
        output_tokens_per_s=generated / elapsed,
        cached_prompt_tokens=reply["cached_prompt_tokens"],
    )
    return run, tokens


def greedy_agreement(ours: list[list[int]], theirs: list[list[int]]) -> GreedyAgreement:
    """How far two engines' greedy outputs agree, request by request."""
    agreeing = 0
    for a, b in zip(ours, theirs):
        n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        agreeing += n
    total = sum(len(a) for a in ours)
    return GreedyAgreement(
        identical_requests=sum(a == b for a, b in zip(ours, theirs)),
        num_requests=len(ours),
        agreeing_token_share=agreeing / total if total else 1.0,
    )


def _params(workload: list[SimRequest], temperature: float) -> list[SamplingParams]:
    """Fixed-length sampling, no top-k / top-p cut (as vLLM's throughput benchmark); 0 is greedy."""
    return [
        SamplingParams(temperature=temperature, top_p=1.0, ignore_eos=True, max_tokens=r.output_len) for r in workload
    ]


def _best(runs: list) -> dict:
    """Mode label -> the fastest pass of that mode."""
    best: dict = {}
    for r in runs:
        if r.label not in best or r.output_tokens_per_s > best[r.label].output_tokens_per_s:
            best[r.label] = r
    return best


def run(args: argparse.Namespace) -> ThroughputResult:
    """The whole `bench throughput` command: engine runs, then the baselines asked for."""
    spec = spec_from_args(args)
    kwargs = bench_engine_kwargs(args)
    workload = bench_workload(spec, kwargs)
    modes = event_modes(args)
    loads = list(dict.fromkeys(args.competing))
    compare = set(args.compare or ())
    python = vllm_python(args.vllm_python) if "vllm" in compare else None  # fail before any engine runs
    hf_runs: list[HFRun] = []
    runs: list[EngineRun] = []
    vllm_runs: list[VLLMRun] = []
    tokens: list[list[int]] = []
    vllm_tokens: list[list[int]] = []
    with record_path(args, modes) as record, ExitStack() as stack:
        engine_kwargs, weights_dir = kwargs, None
        if compare:
            report.quiet_transformers()
            engine_kwargs, weights_dir = stack.enter_context(shared_weights(kwargs))
        engines = stack.enter_context(our_engines(engine_kwargs, modes, args.temperature, record))
        engine_info = engines[modes[0]][0].engine.info
        info = {"device": engine_info.device, "dtype": engine_info.dtype}
        peers: dict[str, VLLMPeer] = {}
        if python is not None:
            peers = stack.enter_context(
                vllm_peers(
                    python,
                    str(weights_dir),
                    vllm_engine_kwargs(engine_kwargs, info["dtype"]),
                    list(dict.fromkeys(args.vllm_cores)),
                )
            )
        vllm_loads = [x for x in loads if x in VLLM_COMPETING]
        for repeat in range(args.repeats):  # the engines take turns, so a drift of the machine hits them alike
            with frozen(*(p.proc for p in peers.values())):  # an idle vLLM wakes ~1,300 times a second
                for mode in modes:
                    for load in loads:
                        run, out = our_pass(*engines[mode], workload, mode, load, repeat, args.temperature)
                        runs.append(run)
                        tokens = tokens or out
            for peer in peers.values():
                with frozen(*(p.proc for p in peers.values() if p is not peer)):
                    for load in vllm_loads:
                        peer_run, out = vllm_pass(peer, workload, load, repeat, args.temperature)
                        vllm_runs.append(peer_run)
                        vllm_tokens = vllm_tokens or out
        recording = engines["record"][0].stop_recording() if "record" in engines else None
        vllm_version = next(iter(peers.values())).version if peers else None
        if "hf" in compare:
            assert weights_dir is not None  # every comparison shares the weights (above)
            model = load_hf_model(weights_dir, info["dtype"], info["device"])
            sizes = sorted({min(b, len(workload)) for b in args.hf_batch_sizes})
            with frozen(*(p.proc for p in peers.values())):
                hf_runs = [run_hf(model, workload, b, args.temperature) for b in sizes]
            del model
    best = _best(runs)
    base_mode = next((m for m in modes if m != "off"), modes[0])  # the dashboard needs events
    result = ThroughputResult(
        workload=spec,
        prompt_tokens=runs[0].prompt_tokens,
        output_tokens=runs[0].output_tokens,
        temperature=args.temperature,
        model=kwargs["model"] or "default",
        engine_args=kwargs,
        runs=runs,
        best=best,
        reference=mode_label(base_mode, loads[0] if "none" not in loads else "none"),
        recording=recording,
        **info,
    )
    if "off" in best and len(modes) > 1:
        off = best["off"].output_tokens_per_s
        result.events_ratio = {m: best[m].output_tokens_per_s / off for m in modes if m != "off"}
    if "record" in best and "on" in best:
        result.record_ratio = best["record"].output_tokens_per_s / best["on"].output_tokens_per_s
    for load in loads if "none" in loads else []:
        loaded = best.get(mode_label(base_mode, load))
        if load != "none" and loaded is not None:
            result.competing_ratio[load] = loaded.output_tokens_per_s / best[base_mode].output_tokens_per_s
    if hf_runs:
        result.hf_runs = hf_runs
        result.hf_best = max(hf_runs, key=lambda r: r.output_tokens_per_s)
        result.hf_ratio = best[result.reference].output_tokens_per_s / result.hf_best.output_tokens_per_s
    if vllm_runs:
        result.vllm_version, result.vllm_runs = vllm_version, vllm_runs
        result.vllm_best = _best(vllm_runs)
        for label, theirs in result.vllm_best.items():
            ours = best.get(mode_label(base_mode, theirs.competing))
            if ours is not None:
                result.vllm_ratio[label] = ours.output_tokens_per_s / theirs.output_tokens_per_s
        if args.temperature == 0:
            result.vllm_agreement = greedy_agreement(tokens, vllm_tokens)
    result.summary = report.throughput_summary(result)
    return result


def main(args: argparse.Namespace) -> int:
    result = run(args)
    report.print_throughput(result)
    if args.plot:
        plot.save_plot(plot.throughput_figure, result, args.plot)
    report.finish(result, args)
    return 0
