"""Decode CUDA graphs against eager steps, on one engine: `python tools/graph_check.py`.

For each model shape (random weights): the engine starts with its decode graphs captured (the
default on CUDA; capture time reported), then
1. greedy parity: the same prompts run with the graphs, then eagerly (the runner's graphs set
   aside: same weights, same KV pool); every token must be equal, and the graph run's decode
   steps must have replayed graphs (StepEvent.cuda_graph_size);
2. decode step time at 1 / 16 / 64 running requests (EngineCore driven as `enginetui bench
   profile` drives it), with and without graphs, against the HBM floor: the weights and the
   batch's KV read once a step, at the measured device-to-device copy bandwidth.

Shapes: opt-125m (fp32 and bf16); with `--shapes llama-3.1-8b qwen3-8b` those public configs too, in bf16.
Prints a markdown table, writes JSON with --json, exits nonzero when a parity check fails.
`--cpu-smoke` runs it all on CPU with a tiny model and the graphs replaced by EagerReplay (the forward
rerun on the same static buffers: core/worker/eager_replay_runner.py), so the script itself runs anywhere.
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


def greedy(core, prompts: list[list[int]], max_tokens: int, tag: str) -> tuple[list[list[int]], list[int]]:
    """Greedy tokens per prompt, run to the end on `core`; and the graph size each step replayed (0: eager)."""
    from enginetui.core import SamplingParams
    from enginetui.core.outputs import EngineCoreRequest

    params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
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
    tokens: dict[str, list[int]] = {req_id: [] for req_id in ids}
    replayed = []
    while core.has_work():
        outputs, event = core.step()
        for out in outputs.outputs:
            tokens[out.request_id] += out.new_token_ids
        if event is not None and event.is_step and event.executed_step:
            replayed.append(event.cuda_graph_size)
    return [tokens[req_id] for req_id in ids], replayed


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
    same = with_graphs == eager and any(replayed) and not any(replayed_eager)
    matched = sum(a == b for a, b in zip(with_graphs, eager))
    report.add(
        "graphs",
        f"{run.name}: greedy parity",
        same,
        f"{matched}/{len(prompts)} prompts equal",
        f"({sum(map(bool, replayed))} of {len(replayed)} steps replayed a graph)",
    )

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


def plan_runs(cpu_smoke: bool, shapes: list[str], root: str) -> list[Run]:
    if cpu_smoke:
        from transformers import OPTConfig

        from enginetui.kernels.e2e_check import OPT_TINY

        path = os.path.join(root, "opt-tiny")
        OPTConfig(**OPT_TINY).save_pretrained(path)
        engine = dict(
            model=path,
            load_format="dummy",
            device="cpu",
            dtype="float32",
            num_gpu_blocks_override=64,
            max_num_seqs=8,
            model_runner="enginetui.core.worker.eager_replay_runner:EagerReplayRunner",
            skip_tokenizer_init=True,
        )
        return [Run("opt-tiny fp32, EagerReplay", engine, [1, 5, 12, 3, 9], 6, [1, 4], 8, 3)]
    opt = dict(
        model="facebook/opt-125m",
        load_format="dummy",
        device="cuda",
        num_gpu_blocks_override=4096,
        skip_tokenizer_init=True,
    )
    # Six prompts decode as a batch of 6, padded to the captured 8: padding is part of the parity.
    runs = [
        Run(f"opt-125m {dtype}", {**opt, "dtype": dtype}, [1, 7, 33, 100, 250, 511], 32, [1, 16, 64], 128, 30)
        for dtype in ("float32", "bfloat16")
    ]
    for name in shapes:
        engine = dict(
            model=shape_dir(name, root),
            load_format="dummy",
            device="cuda",
            dtype="bfloat16",
            max_model_len=4096,
            gpu_memory_utilization=0.85,
            skip_tokenizer_init=True,
        )
        runs.append(Run(f"{name} bf16", engine, [17, 200, 700], 16, [1, 16, 64], 512, 20))  # 3, padded to 4
    return runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="also write the table as JSON to this path")
    parser.add_argument("--cpu-smoke", action="store_true", help="a tiny model on CPU, graphs replayed eagerly")
    parser.add_argument("--shapes", nargs="*", default=[], choices=sorted(SHAPES), help="8B shapes to run too")
    args = parser.parse_args()
    if not args.cpu_smoke and not torch.cuda.is_available():
        print("no CUDA device: run on a CUDA machine, or use --cpu-smoke", file=sys.stderr)
        return 2
    device = "cpu" if args.cpu_smoke else "cuda"
    report = Report(device=torch.cuda.get_device_name() if device == "cuda" else "cpu (EagerReplay)")
    print(f"graph_check on {report.device}: torch {torch.__version__}", flush=True)
    start = time.perf_counter()
    bandwidth = copy_bandwidth_gb_s(2 * 1024**3, device, 10) if device == "cuda" else None
    with tempfile.TemporaryDirectory() as root:
        for run in plan_runs(args.cpu_smoke, args.shapes, root):
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
