"""`enginetui bench ops`: where a step's milliseconds go, operator by operator, in this engine and
(`--compare vllm`) in vLLM, on the same weights, prompts and batch, one machine, in turns.

Each engine runs in one process with its EngineCore inside (ours in this process, as `bench profile`
runs it; vLLM's in its runner with VLLM_ENABLE_V1_MULTIPROCESSING=0), fills a batch of N requests
of --input-len random prompt tokens, decodes --warmup-steps, then times --steps decode steps
plainly and --steps more under the torch profiler (step_profiler.py, the same code for both). With
--prompt-lens, every one of those steps also computes a new prompt of L tokens (a request added
before the step, untimed, with one output token): the steps with prompt work, as when requests
arrive (--batch-sizes 0: the prompt alone). The profiler's self time of each operator goes to a
kind of work (op_kinds.py): attention, KV writes, GEMMs, sampling, torch.compile'd regions, other
operators, and what no operator covers (Python and the framework). The engines take turns,
--repeats times per step shape; medians are reported, with the range of the passes.
"""

import argparse
import os
import statistics
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from enginetui.bench import report
from enginetui.bench.decode_batch import check_decode_capacity, end_decode_batch, start_decode_batch
from enginetui.bench.engines import allocate_as_the_engine_child, bench_engine_kwargs, shared_weights
from enginetui.bench.frozen import frozen
from enginetui.bench.op_kinds import ORDER, ms_per_kind
from enginetui.bench.step_profiler import profile_steps
from enginetui.bench.vllm_peer import VLLMPeer, vllm_engine_kwargs
from enginetui.core.config import EngineConfig
from enginetui.core.engine.core import EngineCore
from enginetui.core.engine.engine_info import EngineInfo
from enginetui.core.engine.output_processor import OutputProcessor
from enginetui.core.engine.processor import Processor
from enginetui.core.engine.tokenizer import load_tokenizer
from enginetui.core.sampling_params import SamplingParams
from enginetui.vllm_launch import vllm_python

TOP_OPS = 8  # operators listed by name per engine and batch size


@dataclass(slots=True)
class OpsPass:
    """One engine's measured steps of one shape, one pass."""

    engine: str  # "ours" or "vllm"
    repeat: int  # 0-based pass number
    step_ms: list[float]  # each plainly timed step's wall time
    profiled_step_ms: float  # mean wall time of the profiled steps (the profiler adds its own cost)
    kind_ms: dict[str, float]  # op_kinds.ORDER -> ms per profiled step
    top_ops: list[tuple[str, float, int]]  # the TOP_OPS costliest operators: name, self ms per step, calls per step

    def ms(self, kind: str) -> float:
        """This pass's ms per step of a kind (op_kinds.ORDER), or for "step" its median plain step."""
        return statistics.median(self.step_ms) if kind == "step" else self.kind_ms[kind]


@dataclass(slots=True)
class OpsRow:
    """Both engines at one step shape."""

    batch_size: int  # decoding requests in every measured step
    prompt_len: int  # prompt tokens a new request adds to every measured step (0: decode only)
    passes: list[OpsPass] = field(default_factory=list)  # in the order they ran (the engines in turns)
    median_ms: dict[str, dict[str, float]] = field(default_factory=dict)  # engine -> kind (and "step") -> median ms

    def shape(self) -> str:
        """The measured step in words: '8 decoding requests and a 128-token prompt'."""
        if not self.prompt_len:
            return f"{self.batch_size} decoding requests"
        prompt = f"a {self.prompt_len}-token prompt"
        return f"{self.batch_size} decoding requests and {prompt}" if self.batch_size else f"{prompt} alone"


@dataclass(slots=True)
class OpsResult:
    """Everything `bench ops` measured (its --json)."""

    model: str  # the model asked for ("default": the embedded one)
    engine_args: dict[str, Any]  # our engine's arguments
    device: str  # where it ran
    dtype: str  # compute dtype
    input_len: int  # prompt tokens of each request
    warmup_steps: int  # decode steps before the measured ones
    steps: int  # steps timed, and as many profiled, per pass
    temperature: float  # sampling temperature of every request
    vllm_version: str | None = None  # with --compare vllm
    rows: list[OpsRow] = field(default_factory=list)  # one per step shape: batch size, then prompt length
    summary: str = ""  # the one-line summary printed last


def measure_ours(
    core: EngineCore,
    processor: Processor,
    output_processor: OutputProcessor,
    prompts: list[list[int]],
    step_prompts: list[list[int]],
    warmup_steps: int,
    steps: int,
    temperature: float,
    repeat: int,
) -> OpsPass:
    """Our engine's pass: the batch filled, warmed up, then timed and profiled, each step adding the
    next of `step_prompts` when given; the batch aborted after."""
    tag = f"ops-{repeat}"
    req_ids = start_decode_batch(core, processor, output_processor, prompts, temperature, tag) if prompts else []
    fresh = iter(enumerate(step_prompts))
    params = SamplingParams(temperature=temperature, ignore_eos=True, max_tokens=1)
    outputs: list[int] = []

    def add_step_prompt() -> None:
        if step_prompts:
            i, prompt = next(fresh)
            request, text = processor.process(f"{tag}-step-{i}", prompt, params)
            output_processor.register(request, text)
            core.add_request(request)

    def step() -> None:
        out = core.step()[0].outputs
        outputs.append(len(out))
        output_processor.process(out)

    for _ in range(warmup_steps):
        add_step_prompt()
        step()
    outputs.clear()
    measured = profile_steps(step, steps, add_step_prompt)
    if req_ids:
        end_decode_batch(core, output_processor, req_ids)
    _check_outputs(outputs, len(prompts) + bool(step_prompts), "ours")
    return _pass("ours", repeat, measured, steps)


def measure_vllm(
    peer: VLLMPeer,
    prompts: list[list[int]],
    step_prompts: list[list[int]],
    max_tokens: int,
    warmup_steps: int,
    steps: int,
    temperature: float,
    repeat: int,
) -> OpsPass:
    """vLLM's pass, the same way in its runner."""
    measured = peer.ops(prompts, max_tokens, warmup_steps, steps, temperature, step_prompts)
    _check_outputs(measured["outputs"], len(prompts) + bool(step_prompts), "vLLM")
    return _pass("vllm", repeat, measured, steps)


def _check_outputs(counts: list[int], expected: int, engine: str) -> None:
    """Every measured step gave a token to each request of the batch and to its new prompt's request."""
    if any(n != expected for n in counts):
        raise RuntimeError(
            f"{engine}: a measured step gave tokens to {min(counts)}-{max(counts)} requests, not "
            f"{expected} (KV pool, max_model_len or the token budget too small for the step shape?)"
        )


def check_budget(config: EngineConfig, batch_size: int, prompt_len: int) -> None:
    """Refuse a step shape whose new prompt the token budget cannot compute whole beside the batch."""
    if prompt_len and batch_size + prompt_len > config.max_num_batched_tokens:
        raise ValueError(
            f"{batch_size} decoding requests and a {prompt_len}-token prompt need {batch_size + prompt_len} "
            f"tokens in one step; the budget is {config.max_num_batched_tokens}: lower --prompt-lens or "
            f"raise --max-num-batched-tokens"
        )


def _pass(engine: str, repeat: int, measured: dict, steps: int) -> OpsPass:
    ops = {name: (us, calls) for name, (us, calls) in measured["ops"].items()}
    top = sorted(ops.items(), key=lambda kv: -kv[1][0])[:TOP_OPS]
    return OpsPass(
        engine=engine,
        repeat=repeat,
        step_ms=measured["step_ms"],
        profiled_step_ms=measured["profiled_step_ms"],
        kind_ms=ms_per_kind(ops, steps, measured["profiled_step_ms"]),
        top_ops=[(name, us / 1e3 / steps, calls // steps) for name, (us, calls) in top],
    )


def medians(passes: list[OpsPass]) -> dict[str, float]:
    """Median over passes of each kind's ms, and "step": of each pass's median plain step."""
    return {kind: statistics.median(p.ms(kind) for p in passes) for kind in (*ORDER, "step")}


@dataclass(slots=True)
class OpsEngines:
    """Our in-process engine (and vLLM's, once started) that step shapes are measured on."""

    kwargs: dict[str, Any]  # our engine's arguments as given
    engine_kwargs: dict[str, Any]  # as run: the shared weights' directory with --compare vllm
    config: EngineConfig
    core: EngineCore
    info: EngineInfo
    processor: Processor
    output_processor: OutputProcessor
    python: str | None  # vLLM's interpreter with --compare vllm
    weights_dir: str | None  # the weights both engines load, with --compare vllm
    peer: VLLMPeer | None = None  # started by start_vllm


def start_ours(args: argparse.Namespace, stack: ExitStack) -> OpsEngines:
    """Our engine in this process (on shared weights with --compare vllm), closed with `stack`."""
    kwargs = bench_engine_kwargs(args)
    python = vllm_python(args.vllm_python) if "vllm" in args.compare else None  # fail before any engine runs
    engine_kwargs, weights_dir = kwargs, None
    if python is not None:
        report.quiet_transformers()
        engine_kwargs, weights_dir = stack.enter_context(shared_weights(kwargs))
    config = EngineConfig(**engine_kwargs)
    core = EngineCore(config)
    stack.callback(core.close)
    info = core.describe(os.getpid())
    tokenizer = load_tokenizer(config, info.model_dir)
    processor, output_processor = Processor(tokenizer, info), OutputProcessor(tokenizer, stream=False)
    weights = str(weights_dir) if weights_dir is not None else None
    return OpsEngines(kwargs, engine_kwargs, config, core, info, processor, output_processor, python, weights)


def start_vllm(engines: OpsEngines, args: argparse.Namespace, stack: ExitStack) -> str | None:
    """With --compare vllm: vLLM's in-process engine on the same weights, closed with `stack`; its version."""
    if engines.python is None or engines.weights_dir is None:
        return None
    kwargs = vllm_engine_kwargs(engines.engine_kwargs, engines.info.dtype)
    peer = VLLMPeer(engines.python, engines.weights_dir, kwargs, args.vllm_cores, in_process=True)
    engines.peer = stack.enter_context(peer)
    return engines.peer.version


def steps_per_pass(args: argparse.Namespace) -> int:
    """Steps one pass runs: each computes one new prompt (with --prompt-lens)."""
    return args.warmup_steps + 2 * args.steps


def measure_shape(
    engines: OpsEngines,
    rng: np.random.Generator,
    batch_size: int,
    prompt_len: int,
    input_len: int,
    args: argparse.Namespace,
) -> OpsRow:
    """One step shape, --repeats passes of each engine in turns, with their medians."""
    info, peer = engines.info, engines.peer
    prompts = [rng.integers(0, info.vocab_size, size=input_len).tolist() for _ in range(batch_size)]
    row = OpsRow(batch_size=batch_size, prompt_len=prompt_len)
    for repeat in range(args.repeats):  # in turns: a drift of the machine hits both engines alike
        # fresh prompts each pass, the same for both engines: none is found in a prefix cache
        step_prompts = [
            rng.integers(0, info.vocab_size, size=prompt_len).tolist()
            for _ in range(steps_per_pass(args) if prompt_len else 0)
        ]
        with frozen(*([peer.proc] if peer is not None else [])):  # an idle vLLM wakes ~1,300 times a second
            row.passes.append(
                measure_ours(
                    engines.core,
                    engines.processor,
                    engines.output_processor,
                    prompts,
                    step_prompts,
                    args.warmup_steps,
                    args.steps,
                    args.temperature,
                    repeat,
                )
            )
        if peer is not None:
            row.passes.append(
                measure_vllm(
                    peer,
                    prompts,
                    step_prompts,
                    info.max_model_len - input_len,
                    args.warmup_steps,
                    args.steps,
                    args.temperature,
                    repeat,
                )
            )
    for engine in dict.fromkeys(p.engine for p in row.passes):
        row.median_ms[engine] = medians([p for p in row.passes if p.engine == engine])
    return row


def run(args: argparse.Namespace) -> OpsResult:
    with ExitStack() as stack:
        engines = start_ours(args, stack)
        info = engines.info
        result = OpsResult(
            model=engines.kwargs["model"] or "default",
            engine_args=engines.kwargs,
            device=info.device,
            dtype=info.dtype,
            input_len=args.input_len,
            warmup_steps=args.warmup_steps,
            steps=args.steps,
            temperature=args.temperature,
        )
        shapes = [(b, n) for b in args.batch_sizes for n in (args.prompt_lens or [0])]
        for batch_size, prompt_len in shapes:  # every shape, before any engine is measured
            if batch_size == prompt_len == 0:
                raise ValueError("a step of 0 decoding requests needs --prompt-lens")
            check_decode_capacity(info, batch_size, args.input_len, steps_per_pass(args), prompt_len)
            check_budget(engines.config, batch_size, prompt_len)
        result.vllm_version = start_vllm(engines, args, stack)
        rng = np.random.default_rng(engines.config.seed)
        for batch_size, prompt_len in shapes:
            result.rows.append(measure_shape(engines, rng, batch_size, prompt_len, args.input_len, args))
    result.summary = report.ops_summary(result)
    return result


def main(args: argparse.Namespace) -> int:
    allocate_as_the_engine_child(args)
    result = run(args)
    report.print_ops(result)
    report.finish(result, args)
    return 0
