"""Decode CUDA graphs against eager steps, on one engine: `python tools/graph_check.py`.

For each model shape (random weights): the engine starts with its decode graphs captured (the
default on CUDA; capture time reported), then
1. greedy parity: the same prompts run with the graphs, then eagerly (the runner's graphs set
   aside: same weights, same KV pool); every token must be equal, and the graph run's decode
   steps must have replayed graphs (StepEvent.cuda_graph_size);
2. greedy parity with transformers: the model built by transformers from the same config on the same
   device and dtype, its random weights loaded into the engine (in place: the captured graphs read the
   same memory); the graph run's tokens must equal `generate`'s, or part at a near tie of its logits;
3. decode step time at 1 / 16 / 64 running requests (EngineCore driven as `enginetui bench
   profile` drives it), with and without graphs, against the HBM floor: the weights and the
   batch's KV read once a step, at the measured device-to-device copy bandwidth.

Models (--models): opt-125m in fp32 and bf16, the Llama-3.1-8B and Qwen3-8B public configs in bf16.
Prints a markdown table, writes JSON with --json, exits nonzero when a parity check fails.
`--cpu-smoke` runs it all on CPU with tiny models (the 8B configs scaled down) and the graphs replaced by
EagerReplay (the forward rerun on the same static buffers: core/worker/eager_replay_runner.py), so the
script itself runs anywhere.
"""

import argparse
import gc
import json
import os
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass

import torch
from gpu_check import Report, copy_bandwidth_gb_s  # tools/gpu_check.py, beside this script

from enginetui.core.config import EngineConfig
from enginetui.core.models.known_configs import SHAPES, shape_dir
from enginetui.kernels.e2e_check import Continuation, compare, hf_greedy

MODELS = ["opt-125m-fp32", "opt-125m-bf16", *SHAPES]
# bf16 tolerances of the transformers comparison (fp32 keeps e2e_check's 1e-3): two correct bf16
# implementations round differently, about 1e-2 on these logits, so they may part where the top two
# logits are closer than this, and logprobs of the tokens they share differ by up to about this.
BF16_NEAR_TIE = 0.1
BF16_LOGPROB_TOL = 0.1


@dataclass(slots=True)
class Run:
    """One model shape's engine settings and workload."""

    name: str  # what the table calls it
    engine: dict  # EngineConfig keywords
    prompt_lens: list[int]  # one greedy parity prompt per length
    max_tokens: int  # greedy tokens per prompt
    batch_sizes: list[int]  # running requests of the timed decode steps
    input_len: int  # prompt tokens of each timed request
    steps: int  # timed decode steps per batch size (after as many warm-up steps)


def greedy(core, prompts: list[list[int]], max_tokens: int, tag: str) -> tuple[list[Continuation], list[int]]:
    """Greedy tokens (and their logprobs) per prompt, run to the end on `core`; and the graph size each step
    replayed (0: eager)."""
    from enginetui.core import SamplingParams
    from enginetui.core.outputs import EngineCoreRequest

    params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True, logprobs=0)
    ids = [f"{tag}-{i}" for i in range(len(prompts))]
    for req_id, prompt in zip(ids, prompts):
        core.add_request(
            EngineCoreRequest(
                request_id=req_id,
                prompt_token_ids=prompt,
                sampling_params=params,
                eos_token_ids=[],
                arrival_time=time.time(),
            )
        )
    runs = {req_id: Continuation([], []) for req_id in ids}
    replayed = []
    while core.has_work():
        outputs, event = core.step()
        for out in outputs.outputs:
            runs[out.request_id].tokens.extend(out.new_token_ids)
            runs[out.request_id].logprobs.extend(step[0].logprob for step in out.new_logprobs or [])
        if event is not None and event.is_step and event.executed_step:
            replayed.append(event.cuda_graph_size)
    return [runs[req_id] for req_id in ids], replayed


def transformers_twin(config: EngineConfig, core):
    """transformers' model of the engine's config, random weights, on the engine's device and dtype; its
    weights loaded into the engine in place (captured graphs keep reading the same memory)."""
    from transformers import AutoModelForCausalLM

    from enginetui.core.models.loader import load_hf_config

    hf_config, _ = load_hf_config(config)
    dtype = config.torch_dtype(getattr(hf_config, "dtype", None))
    torch.manual_seed(0)
    with torch.device(config.torch_device):
        hf = AutoModelForCausalLM.from_config(hf_config, dtype=dtype).eval()
    core.runner.model.load_weights(hf.named_parameters())  # shared (tied) parameters named once
    return hf


def check_transformers(run: Run, config: EngineConfig, core, prompts: list[list[int]], report: Report) -> None:
    """The engine's greedy tokens (graphs on) against transformers' `generate`, prompt by prompt."""
    hf = transformers_twin(config, core)
    ours, replayed = greedy(core, prompts, run.max_tokens, "hf")
    half = next(hf.parameters()).dtype != torch.float32
    parities = [compare(hf, p, hf_greedy(hf, p, run.max_tokens), c) for p, c in zip(prompts, ours)]
    del hf
    for parity in parities:
        ok = parity.ok_within(BF16_NEAR_TIE, BF16_LOGPROB_TOL) if half else parity.ok
        tie = "" if parity.near_tie_gap is None else f"; parted at a logit gap of {parity.near_tie_gap:.2g}"
        report.add(
            "transformers",
            f"{run.name}: prompt of {parity.prompt_len}",
            ok,
            f"{parity.matched}/{run.max_tokens} tokens equal",
            f"(max logprob diff {parity.max_logprob_diff:.1e}{tie}; {sum(map(bool, replayed))} of "
            f"{len(replayed)} steps replayed a graph)",
            matched=parity.matched,
            near_tie_gap=parity.near_tie_gap,
            max_logprob_diff=parity.max_logprob_diff,
        )


def check_run(run: Run, report: Report, device: str, bandwidth_gb_s: float | None) -> None:
    """Parity with and without graphs, then decode step times, for one model shape."""
    from enginetui.bench.decode_profile import profile_decode
    from enginetui.core.engine.core import EngineCore
    from enginetui.core.engine.output_processor import OutputProcessor
    from enginetui.core.engine.processor import Processor
    from enginetui.core.engine.tokenizer import load_tokenizer

    config = EngineConfig(**run.engine)
    start = time.perf_counter()
    core = EngineCore(config)
    info = core.describe(os.getpid())
    graphs = core.runner.graphs
    report.add(
        "graphs",
        f"{run.name}: capture",
        None if graphs else False,
        f"{len(info.cuda_graph_sizes)} sizes in {info.cuda_graph_capture_s:.2f} s",
        f"(engine start {time.perf_counter() - start:.1f} s; {info.cuda_graphs_off or 'captured'})",
        sizes=info.cuda_graph_sizes,
        capture_s=info.cuda_graph_capture_s,
    )
    if graphs is None:
        core.close()
        return
    gen = torch.Generator().manual_seed(0)
    prompts = [torch.randint(0, info.vocab_size, (n,), generator=gen).tolist() for n in run.prompt_lens]
    with_graphs, replayed = greedy(core, prompts, run.max_tokens, "graphs")
    core.runner.graphs = None
    eager, replayed_eager = greedy(core, prompts, run.max_tokens, "eager")
    core.runner.graphs = graphs
    same = [c.tokens for c in with_graphs] == [c.tokens for c in eager] and any(replayed) and not any(replayed_eager)
    matched = sum(a.tokens == b.tokens for a, b in zip(with_graphs, eager))
    report.add(
        "graphs",
        f"{run.name}: greedy parity",
        same,
        f"{matched}/{len(prompts)} prompts equal",
        f"({sum(map(bool, replayed))} of {len(replayed)} steps replayed a graph)",
    )
    check_transformers(run, config, core, prompts, report)
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()

    tokenizer = load_tokenizer(config, info.model_dir)
    processor, output_processor = Processor(tokenizer, info), OutputProcessor(tokenizer, stream=False)
    weight_bytes = info.num_parameters * torch.finfo(getattr(torch, info.dtype)).bits // 8
    for n in run.batch_sizes:
        rows = {}
        for mode in ("graphs", "eager"):
            core.runner.graphs = graphs if mode == "graphs" else None
            rows[mode] = profile_decode(core, processor, output_processor, n, run.input_len, run.steps, run.steps)
        core.runner.graphs = graphs
        detail = f"eager {rows['eager'].step_ms:.2f} ms (forward {rows['eager'].stage_ms['forward']:.2f})"
        data = {
            "graphs_ms": rows["graphs"].step_ms,
            "eager_ms": rows["eager"].step_ms,
            "graphs_forward_ms": rows["graphs"].stage_ms["forward"],
        }
        if bandwidth_gb_s:
            context = run.input_len + run.steps  # tokens each request holds by the last timed step, about
            floor_ms = (weight_bytes + n * context * info.kv_bytes_per_token) / (bandwidth_gb_s * 1e6)
            detail += f"; HBM floor {floor_ms:.2f} ms, graphs at {floor_ms / rows['graphs'].step_ms:.0%} of it"
            data["floor_ms"] = floor_ms
        report.add(
            "decode step",
            f"{run.name}: {n} running",
            None,
            f"graphs {rows['graphs'].step_ms:.2f} ms (forward {rows['graphs'].stage_ms['forward']:.2f})",
            f"({detail})",
            **data,
        )
    core.close()


# The 8B configs scaled down for --cpu-smoke: their architectures (GQA, Llama-3.1's rope scaling,
# Qwen3's q/k norms and explicit head_dim) at a size the CPU runs in seconds.
SMALL_SHAPE = dict(
    vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, head_dim=16, max_position_embeddings=512, torch_dtype="float32", bos_token_id=1,
    eos_token_id=2,
)  # fmt: skip


def small_shape_dir(name: str, root: str) -> str:
    """A model directory holding SHAPES[name]'s config scaled down to SMALL_SHAPE."""
    from transformers import AutoConfig

    fields = {**SHAPES[name], **SMALL_SHAPE}
    path = os.path.join(root, f"{name}-small")
    AutoConfig.for_model(str(fields.pop("model_type")), **fields).save_pretrained(path)
    return path


def plan_runs(cpu_smoke: bool, models: list[str], root: str) -> list[Run]:
    """One Run per model named (in MODELS' order); on CPU tiny models, graphs replayed by EagerReplay."""
    runs = []
    if cpu_smoke:
        from transformers import OPTConfig

        from enginetui.kernels.e2e_check import OPT_TINY

        cpu = dict(
            load_format="dummy",
            device="cpu",
            dtype="float32",
            num_gpu_blocks_override=64,
            max_num_seqs=8,
            model_runner="enginetui.core.worker.eager_replay_runner:EagerReplayRunner",
            skip_tokenizer_init=True,
        )
        if any(name.startswith("opt-") for name in models):
            path = os.path.join(root, "opt-tiny")
            OPTConfig(**OPT_TINY).save_pretrained(path)
            runs.append(Run("opt-tiny fp32, EagerReplay", {**cpu, "model": path}, [1, 5, 12, 3, 9], 6, [1, 4], 8, 3))
        for name in (m for m in MODELS if m in SHAPES and m in models):
            engine = {**cpu, "model": small_shape_dir(name, root)}
            runs.append(Run(f"{name}-small fp32, EagerReplay", engine, [4, 11, 3], 5, [1, 4], 8, 2))
        return runs
    opt = dict(
        model="facebook/opt-125m",
        load_format="dummy",
        device="cuda",
        num_gpu_blocks_override=4096,
        skip_tokenizer_init=True,
    )
    for model, dtype in (("opt-125m-fp32", "float32"), ("opt-125m-bf16", "bfloat16")):
        if model in models:
            # Six prompts decode as a batch of 6, padded to the captured 8: padding is part of the parity.
            runs.append(
                Run(f"opt-125m {dtype}", {**opt, "dtype": dtype}, [1, 7, 33, 100, 250, 511], 32, [1, 16, 64], 128, 30)
            )
    for name in (m for m in MODELS if m in SHAPES and m in models):
        engine = dict(
            model=shape_dir(name, root),
            load_format="dummy",
            device="cuda",
            dtype="bfloat16",
            max_model_len=4096,
            # 64 x 16 tokens: the timed 64 x (512 + 40) tokens fit, and transformers' copy of the weights
            # beside the engine's on an 80 GB card too
            num_gpu_blocks_override=4096,
            skip_tokenizer_init=True,
        )
        runs.append(Run(f"{name} bf16", engine, [17, 200, 700], 16, [1, 16, 64], 512, 20))  # 3, padded to 4
    return runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="also write the table as JSON to this path")
    parser.add_argument("--cpu-smoke", action="store_true", help="a tiny model on CPU, graphs replayed eagerly")
    parser.add_argument(
        "--models", nargs="+", default=MODELS[:2], choices=MODELS, help="models to run (default: the opt-125m pair)"
    )
    args = parser.parse_args()
    if not args.cpu_smoke and not torch.cuda.is_available():
        print("no CUDA device: run on a CUDA machine, or use --cpu-smoke", file=sys.stderr)
        return 2
    device = "cpu" if args.cpu_smoke else "cuda"
    if args.cpu_smoke:  # as on CUDA: linear weights as loaded (the CPU's prepacking would take their place)
        from enginetui.core.worker.cpu_linear import LINEAR_BACKEND_ENV

        os.environ[LINEAR_BACKEND_ENV] = "torch"
    report = Report(device=torch.cuda.get_device_name() if device == "cuda" else "cpu (EagerReplay)")
    print(f"graph_check on {report.device}: torch {torch.__version__}", flush=True)
    start = time.perf_counter()
    bandwidth = copy_bandwidth_gb_s(2 * 1024**3, device, 10) if device == "cuda" else None
    with tempfile.TemporaryDirectory() as root:
        for run in plan_runs(args.cpu_smoke, args.models, root):
            try:
                check_run(run, report, device, bandwidth)
            except Exception as exc:  # a crash fails the run; the other shapes still report
                traceback.print_exc()
                report.add("crash", run.name, False, type(exc).__name__, str(exc)[:200])
            gc.collect()
            if device == "cuda":
                torch.cuda.empty_cache()
    print(f"\n{report.markdown()}\n\n{'PASS' if report.ok else 'FAIL'} in {time.perf_counter() - start:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(asdict(report), f, indent=2)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
