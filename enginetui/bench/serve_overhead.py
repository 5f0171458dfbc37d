"""What a server costs against LLM.generate: `enginetui bench serve --compare generate | vllm-generate`.

The workload all at once, --repeats times through a server and --repeats times through LLM.generate
(offline, EngineCore in its own process as well), taking turns (server, generate, generate, server,
...: a machine whose speed drifts weighs on both alike), each pass in an engine started for it and
stopped after (so no idle engine sits beside the other: on 2 cores even its few wakes slow a run);
the best passes' throughput ratio is what HTTP, the asyncio front end and streaming cost.

`vllm-generate` measures vLLM the same way beside ours, all four kinds of pass taking turns on the
same weights and step budget: vLLM's OpenAI server (our streaming client, as for ours) against
vLLM's LLM.generate (both on every core). A server's cost depends on what its engine leaves of
the machine: an engine whose threads wait spinning gives a front-end that time for nothing.
"""

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from enginetui.bench import report
from enginetui.bench.engines import shared_weights
from enginetui.bench.serve_load import TEMPERATURE, run_workload, serve_flags
from enginetui.bench.vllm_peer import VLLMPeer, start_peer_server, vllm_engine_kwargs
from enginetui.bench.workload import at_once, prompts_of, total_output_len
from enginetui.core.config import EngineConfig
from enginetui.flags.engine import ENGINE_DEFAULTS
from enginetui.simulate.workload import SimRequest


@dataclass(slots=True)
class OverheadResult:
    """One engine's workload all at once: through its server vs through its LLM.generate."""

    http_s: list[float]  # duration of each pass through the server (first send to last token), in order
    generate_s: list[float]  # duration of each LLM.generate pass (call to return), in order
    output_tokens: int  # output tokens of one pass
    http_tok_s: float  # best pass through the server, output tokens / s
    generate_tok_s: float  # best LLM.generate pass, output tokens / s
    ratio: float  # http_tok_s / generate_tok_s (1.0: the server costs nothing)

    @classmethod
    def of(cls, http_s: list[float], generate_s: list[float], output_tokens: int) -> "OverheadResult":
        http_tok_s, generate_tok_s = output_tokens / min(http_s), output_tokens / min(generate_s)
        return cls(
            http_s=http_s,
            generate_s=generate_s,
            output_tokens=output_tokens,
            http_tok_s=http_tok_s,
            generate_tok_s=generate_tok_s,
            ratio=http_tok_s / generate_tok_s,
        )


def take_turns(passes: dict[str, Callable[[], float]], repeats: int) -> dict[str, list[float]]:
    """Every pass `repeats` times, in their order, then backwards, and so on; each one's durations."""
    names = list(passes)
    durations: dict[str, list[float]] = {name: [] for name in names}
    for i in range(repeats):
        for name in names if i % 2 == 0 else reversed(names):
            durations[name].append(passes[name]())
    return durations


def overhead(
    kwargs: dict[str, Any],
    workload: list[SimRequest],
    warmup: list[SimRequest],
    repeats: int,
    seed: int,
    timeout_s: float,
) -> OverheadResult:
    """This engine's server against its LLM.generate, `repeats` passes each, taking turns."""
    durations = take_turns(
        {
            "server": lambda: server_pass(kwargs, workload, warmup, seed, timeout_s),
            "generate": lambda: generate_pass_alone(kwargs, workload, warmup),
        },
        repeats,
    )
    return OverheadResult.of(durations["server"], durations["generate"], total_output_len(workload))


def overhead_beside_vllm(
    kwargs: dict[str, Any],
    workload: list[SimRequest],
    warmup: list[SimRequest],
    repeats: int,
    seed: int,
    timeout_s: float,
    python: str,
) -> tuple[OverheadResult, OverheadResult]:
    """This engine's and vLLM's servers against their LLM.generate, on the same weights, all four kinds
    of pass taking turns; (ours, vLLM's)."""
    with shared_weights(kwargs) as (shared, weights_dir):
        dtype = str(EngineConfig(**shared).torch_dtype(None)).removeprefix("torch.")
        engine = {
            **vllm_engine_kwargs(shared, dtype),
            "enable_prefix_caching": False,
            "max_num_batched_tokens": step_budget(shared),
        }
        durations = take_turns(
            {
                "server": lambda: server_pass(shared, workload, warmup, seed, timeout_s),
                "generate": lambda: generate_pass_alone(shared, workload, warmup),
                "vllm-generate": lambda: vllm_generate_pass(python, weights_dir, engine, workload),
                "vllm-server": lambda: vllm_server_pass(python, weights_dir, engine, workload, warmup, seed, timeout_s),
            },
            repeats,
        )
    tokens = total_output_len(workload)
    return (
        OverheadResult.of(durations["server"], durations["generate"], tokens),
        OverheadResult.of(durations["vllm-server"], durations["vllm-generate"], tokens),
    )


def step_budget(kwargs: dict[str, Any]) -> int:
    """The step's token budget the server runs with (given, else the server's default)."""
    return kwargs.get("max_num_batched_tokens") or ENGINE_DEFAULTS["max_num_batched_tokens"]


def generate_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """LLM's arguments for the engine the server ran: its step budget too (LLM alone would take
    vLLM's offline budget on CPU, the server keeps the online one)."""
    return {**kwargs, "max_num_batched_tokens": step_budget(kwargs)}


def generate_pass(llm, workload: list[SimRequest]) -> float:
    """LLM.generate on the workload, all at once; its duration."""
    from enginetui.core import SamplingParams

    params = [
        SamplingParams(temperature=TEMPERATURE, top_p=1.0, ignore_eos=True, max_tokens=r.output_len) for r in workload
    ]
    t0 = time.perf_counter()
    outputs = llm.generate(prompts_of(workload), params, use_tqdm=False)
    duration = time.perf_counter() - t0
    if sum(len(o.outputs[0].token_ids) for o in outputs) != total_output_len(workload):
        raise RuntimeError("LLM.generate did not generate the workload's tokens")
    return duration


def server_pass(
    kwargs: dict[str, Any], workload: list[SimRequest], warmup: list[SimRequest], seed: int, timeout_s: float
) -> float:
    """Start `enginetui serve`, warm it up, send the workload all at once, stop it; the pass's duration."""
    from enginetui.serve.process import ServeProcess

    server = ServeProcess(*serve_flags(kwargs))
    try:
        return asyncio.run(run_workload(server.url, None, at_once(workload), warmup, timeout_s))[1]
    finally:
        server.stop()


def generate_pass_alone(kwargs: dict[str, Any], workload: list[SimRequest], warmup: list[SimRequest]) -> float:
    """Start an LLM with the server's engine flags, warm it up, run the workload, shut it down; the duration."""
    from enginetui.core import LLM

    with LLM(**generate_kwargs(kwargs)) as llm:
        generate_pass(llm, warmup)
        return generate_pass(llm, workload)


def vllm_server_pass(
    python: str,
    weights_dir: Path,
    engine: dict[str, Any],
    workload: list[SimRequest],
    warmup: list[SimRequest],
    seed: int,
    timeout_s: float,
) -> float:
    """Start vLLM's OpenAI server, warm it up, send the workload all at once, stop it; the duration."""
    with start_peer_server(python, str(weights_dir), {**engine, "skip_tokenizer_init": True}) as server:
        return asyncio.run(run_workload(server.url, None, at_once(workload), warmup, timeout_s))[1]


def vllm_generate_pass(python: str, weights_dir: Path, engine: dict[str, Any], workload: list[SimRequest]) -> float:
    """Start vLLM's LLM on every core (it warms itself up), time its generate on the workload, stop it."""
    with VLLMPeer(python, str(weights_dir), engine, cores="all") as peer:
        timed = peer.throughput(prompts_of(workload), [r.output_len for r in workload], TEMPERATURE)
    if sum(len(ids) for ids in timed["output_token_ids"]) != total_output_len(workload):
        raise RuntimeError("vLLM's LLM.generate did not generate the workload's tokens")
    return timed["elapsed_s"]


def print_overhead(ours: OverheadResult, vllm: OverheadResult | None) -> None:
    print(
        f"all at once, {ours.output_tokens} output tokens, {len(ours.http_s)} passes each, taking turns, "
        f"each in an engine of its own (the best counts):"
    )
    rows = [
        ["server (HTTP, streamed)", *_spread(ours.http_s), ours.http_tok_s],
        ["LLM.generate", *_spread(ours.generate_s), ours.generate_tok_s],
    ]
    if vllm is not None:
        rows += [
            ["vLLM's server (streamed)", *_spread(vllm.http_s), vllm.http_tok_s],
            ["vLLM's LLM.generate", *_spread(vllm.generate_s), vllm.generate_tok_s],
        ]
    print(report.table(["", "best s", "median s", "worst s", "output tok/s"], rows))
    print(f"server / LLM.generate throughput: {ours.ratio:.3f}x")
    if vllm is not None:
        print(
            f"vLLM's server / vLLM's LLM.generate: {vllm.ratio:.3f}x; ours / vLLM's: servers "
            f"{ours.http_tok_s / vllm.http_tok_s:.3f}x, LLM.generate {ours.generate_tok_s / vllm.generate_tok_s:.3f}x"
        )


def summary(ours: OverheadResult, vllm: OverheadResult | None) -> str:
    line = (
        f"all at once: server {ours.http_tok_s:.1f} vs LLM.generate {ours.generate_tok_s:.1f} output tok/s "
        f"({ours.ratio:.3f}x)"
    )
    if vllm is not None:
        line += (
            f"; vLLM's server {vllm.http_tok_s:.1f} vs its LLM.generate {vllm.generate_tok_s:.1f} ({vllm.ratio:.3f}x)"
        )
    return line


def _spread(durations: list[float]) -> list[float]:
    return [min(durations), float(np.median(durations)), max(durations)]
