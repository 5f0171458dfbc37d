"""The engine's command-line flags (vLLM's names) and their defaults, in one place.

`enginetui` (enginetui/cli.py), its dashboard (enginetui/dashboard/app.py), `enginetui serve`,
`enginetui simulate` and `enginetui bench` take them from here. Each flag's default is the
engine's own (core.config.EngineConfig), written into its help text; the dashboard's one default
of its own, a small KV pool, is here too.
"""

import argparse
import os
import re
from dataclasses import dataclass, field, fields
from typing import Any

from enginetui.core.config import CPU_KV_SPACE_ENV, ConfigError, EngineConfig

ENGINE_DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(EngineConfig)}  # EngineConfig field -> default


@dataclass(frozen=True, slots=True)
class EngineFlag:
    """One engine flag: its vLLM name, what it sets, and how its default reads."""

    flag: str  # "--max-num-batched-tokens"; the EngineConfig field is the name without dashes
    help: str  # what it sets, without the default
    unset: str = ""  # what the engine does when the default is None, in words
    kwargs: dict[str, Any] = field(default_factory=dict)  # other argparse keywords (type, action, choices)

    @property
    def dest(self) -> str:
        """The EngineConfig field (and AsyncLLM keyword) it sets."""
        return self.flag[2:].replace("-", "_")

    def default_text(self) -> str:
        """The engine's default in words: `2048`, `on`, `auto`, or what None means."""
        default = ENGINE_DEFAULTS[self.dest]
        if default is None:
            return self.unset
        if isinstance(default, bool):
            return "on" if default else "off"
        return str(default)


ENGINE_FLAGS: tuple[EngineFlag, ...] = (
    EngineFlag("--model", "HF model directory or hub id", unset="the embedded default model"),
    EngineFlag(
        "--tokenizer",
        "tokenizer directory or hub id",
        unset="the model's; with --load-format dummy and no tokenizer, the embedded model's when the "
        "vocabulary fits, else a byte-level one",
        kwargs={"metavar": "DIR"},
    ),
    EngineFlag("--max-num-batched-tokens", "token budget of one step", kwargs={"type": int, "metavar": "N"}),
    EngineFlag("--max-num-seqs", "most requests running at once", kwargs={"type": int, "metavar": "N"}),
    EngineFlag("--block-size", "tokens per KV block", kwargs={"type": int, "metavar": "N"}),
    EngineFlag(
        "--num-gpu-blocks-override",
        "KV pool size in blocks",
        unset="sized from the KV memory",
        kwargs={"type": int, "metavar": "N"},
    ),
    EngineFlag(
        "--gpu-memory-utilization",
        "share of the device's memory for weights, activations and the KV pool, as vLLM's (on CPU: of the RAM)",
        unset="0.92 on CUDA and 2 GiB or 1/4 of the free RAM on CPU, the pool no larger than --max-num-seqs "
        "requests of --max-model-len tokens use",
        kwargs={"type": float, "metavar": "FRACTION"},
    ),
    EngineFlag(
        "--kv-cache-memory-bytes",
        f"KV pool memory, e.g. 512M or 2G (wins over --gpu-memory-utilization; "
        f"on CPU ${CPU_KV_SPACE_ENV}=GIB, vLLM's variable, does the same)",
        unset="see --gpu-memory-utilization",
        kwargs={"type": lambda text: byte_count(text), "metavar": "BYTES"},
    ),
    EngineFlag(
        "--enable-chunked-prefill", "split long prompts over steps", kwargs={"action": argparse.BooleanOptionalAction}
    ),
    EngineFlag(
        "--enable-prefix-caching", "reuse KV of shared prefixes", kwargs={"action": argparse.BooleanOptionalAction}
    ),
    EngineFlag(
        "--scheduling-policy",
        "fcfs or priority (lower priority value runs first)",
        kwargs={"choices": ("fcfs", "priority")},
    ),
    EngineFlag(
        "--scheduler-reserve-full-isl",
        "admit a waiting request only if its whole prompt fits in free "
        "blocks (vLLM >= 0.23; off: only its first chunk must, as vLLM 0.22)",
        kwargs={"action": argparse.BooleanOptionalAction},
    ),
    EngineFlag(
        "--long-prefill-token-threshold",
        "cap on one request's prefill tokens per step while others run (0: no cap)",
        kwargs={"type": int, "metavar": "N"},
    ),
    EngineFlag(
        "--async-scheduling",
        "plan step N+1 while step N executes (vLLM's AsyncScheduler; output placeholders)",
        unset="on for CUDA, off on CPU, as vLLM decides",
        kwargs={"action": argparse.BooleanOptionalAction},
    ),
    EngineFlag(
        "--enforce-eager",
        "capture no CUDA graphs: every step runs eagerly (on CPU there are none anyway)",
        kwargs={"action": argparse.BooleanOptionalAction},
    ),
    EngineFlag(
        "--cudagraph-capture-sizes",
        "decode batch sizes captured as CUDA graphs; a decode step runs "
        "padded to the next captured size, eagerly past the largest",
        unset="vLLM's: 1, 2, 4, every 8 to 248, every 16 to --max-cudagraph-capture-size, and --max-num-seqs",
        kwargs={"type": int, "nargs": "+", "metavar": "N"},
    ),
    EngineFlag(
        "--max-cudagraph-capture-size",
        "largest size of the default capture list",
        unset="min(2 x --max-num-seqs, 512)",
        kwargs={"type": int, "metavar": "N"},
    ),
    EngineFlag(
        "--stream-interval",
        "new tokens a streamed output carries at least, the first and the last sent "
        "at once (fewer outputs, less front-end work per token)",
        kwargs={"type": int, "metavar": "N"},
    ),
    EngineFlag(
        "--max-model-len",
        "longest prompt + output in tokens",
        unset="the model's max positions",
        kwargs={"type": int, "metavar": "N"},
    ),
    EngineFlag(
        "--dtype",
        "weights / activations dtype: auto (float32 on CPU, the checkpoint's on CUDA), float32, float16, bfloat16",
    ),
    EngineFlag("--load-format", "dummy: random weights, no download", kwargs={"choices": ("auto", "dummy")}),
    EngineFlag("--seed", "engine random seed (dummy weights, requests without a seed)", kwargs={"type": int}),
    EngineFlag("--device", "cpu, cuda, or auto (cuda when available)"),
    EngineFlag(
        "--cpu-threads",
        "threads EngineCore computes with on CPU",
        unset="$OMP_NUM_THREADS, else every usable core less --cpu-reserved-cores",
        kwargs={"type": int, "metavar": "N"},
    ),
    EngineFlag(
        "--cpu-reserved-cores",
        "usable cores left to the front-end (client, dashboard) when --cpu-threads is not given",
        kwargs={"type": int, "metavar": "N"},
    ),
    EngineFlag(
        "--cpu-spin-count",
        "OpenMP spin loops before a waiting EngineCore thread sleeps (GOMP_SPINCOUNT)",
        unset="$GOMP_SPINCOUNT (or $OMP_WAIT_POLICY), else 10000",
        kwargs={"type": int, "metavar": "N"},
    ),
)

DASHBOARD_NUM_BLOCKS = 512  # the dashboard's KV pool when no flag (nor VLLM_CPU_KVCACHE_SPACE) sizes it
DASHBOARD_POOL_RULE = "the dashboard's default"  # the model panel's "sized by ..." for that pool
POOL_HINT = (  # how the help screen explains the pool size
    f"dashboard default {DASHBOARD_NUM_BLOCKS} blocks so pages are visible; "
    "pass --num-gpu-blocks-override N to change it"
)
DASHBOARD_HELP = {  # the dashboard's own wording of some engine flags (bench keeps the engine's)
    "--num-gpu-blocks-override": f"KV pool size in blocks (default: {DASHBOARD_NUM_BLOCKS} in the dashboard, so "
    "pages are visible, unless --kv-cache-memory-bytes, --gpu-memory-utilization or "
    f"${CPU_KV_SPACE_ENV} sizes it; the engine's own default sizes the pool from the KV memory)",
    "--seed": "engine random seed (dummy weights, requests without a seed); also picks the prompts and lengths "
    f"of b bursts (default: {ENGINE_DEFAULTS['seed']})",
}


def add_engine_args(
    parser: argparse.ArgumentParser, help_overrides: dict[str, str] | None = None, subcommand: bool = False
) -> None:
    """Add the engine flags to `parser`, each with the engine's default in its help;
    `help_overrides` replaces some flags' whole help text.

    A subcommand's flags leave unset values alone, so `enginetui --model M bench ...` keeps M.
    """
    group = parser.add_argument_group("engine (vLLM's flag names)")
    default = argparse.SUPPRESS if subcommand else None
    for spec in ENGINE_FLAGS:
        text = (help_overrides or {}).get(spec.flag) or f"{spec.help} (default: {spec.default_text()})"
        group.add_argument(spec.flag, default=default, help=text.replace("%", "%%"), **spec.kwargs)


def engine_args(args: argparse.Namespace) -> dict[str, Any]:
    """AsyncLLM.from_engine_args keywords: the model (None = default) and every flag given.

    `enginetui serve MODEL` (vLLM's positional model) is the same as `--model MODEL`."""
    chosen = {spec.dest: getattr(args, spec.dest, None) for spec in ENGINE_FLAGS}
    if getattr(args, "model_tag", None) is not None:
        chosen["model"] = args.model_tag
    return {k: v for k, v in chosen.items() if v is not None or k == "model"}


def as_flags(engine: dict[str, Any]) -> list[str]:
    """Engine keywords as vLLM's command-line flags: booleans as --x / --no-x, lists as --x V1 V2 ..., the rest
    as --x VALUE."""
    flags = []
    for name, value in engine.items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            flags.append(flag if value else f"--no-{flag[2:]}")
        elif isinstance(value, (list, tuple)):
            flags += [flag, *map(str, value)]
        else:
            flags += [flag, str(value)]
    return flags


def dashboard_engine_args(args: argparse.Namespace) -> dict[str, Any]:
    """engine_args() plus the dashboard's own default: a pool small enough to see its pages."""
    kwargs = engine_args(args)
    memory_given = {"kv_cache_memory_bytes", "gpu_memory_utilization"} & kwargs.keys()
    if not memory_given and not os.environ.get(CPU_KV_SPACE_ENV, "").strip():
        kwargs.setdefault("num_gpu_blocks_override", DASHBOARD_NUM_BLOCKS)
    return kwargs


def dashboard_pool_rule(args: argparse.Namespace) -> str | None:
    """The model panel's "sized by ..." where the dashboard's own default sized the pool (the engine
    would name --num-gpu-blocks-override, which nobody gave); None where the engine's rule is true."""
    return DASHBOARD_POOL_RULE if dashboard_engine_args(args).keys() - engine_args(args).keys() else None


def flag_problem(args: argparse.Namespace) -> str | None:
    """What the engine's validator (core.config.EngineConfig) refuses in the engine flags given, named by
    flag, as argparse says it ("argument --max-num-seqs: must be ..."); None when all is well. No torch."""
    model_tag, model = getattr(args, "model_tag", None), getattr(args, "model", None)
    if model_tag is not None and model is not None and model_tag != model:
        return f"argument --model: {model!r} and the positional MODEL {model_tag!r} differ; give one"
    try:
        EngineConfig(**engine_args(args))
    except ConfigError as exc:
        flag = "--" + exc.field.replace("_", "-")
        if flag not in FLAG_NAMES:
            return str(exc)  # an environment variable, or a field no flag sets
        return f"argument {flag}: {str(exc).removeprefix(exc.field + ' ')}"
    return None


def startup_problem(kwargs: dict[str, Any]) -> str | None:
    """What would stop EngineCore from starting that is found without starting it: a model (or
    tokenizer) that is not there, or a --max-model-len beyond the model's positions, in one line
    naming its flag; None when none is found."""
    from enginetui.core.models.loader import ModelLoadError, check_model, resolve_model_dir

    config = EngineConfig(**kwargs)
    try:
        check_model(EngineConfig(**{**kwargs, "tokenizer": None}))
    except ModelLoadError as exc:
        return f"--model {config.model}: {exc}"
    except ConfigError as exc:  # a value this model cannot take (--max-model-len beyond its positions)
        return f"--{exc.field.replace('_', '-')} {getattr(config, exc.field)}: {exc}"
    if config.tokenizer:
        try:
            resolve_model_dir(config.tokenizer)
        except ModelLoadError as exc:
            return f"--tokenizer {config.tokenizer}: {exc}"
    return None


FLAG_NAMES = frozenset(spec.flag for spec in ENGINE_FLAGS)  # every engine flag, e.g. "--max-num-seqs"
_BYTE_UNITS = {
    "": 1,
    "k": 1000,
    "m": 1000**2,
    "g": 1000**3,
    "t": 1000**4,
    "ki": 1024,
    "mi": 1024**2,
    "gi": 1024**3,
    "ti": 1024**4,
}  # suffix -> bytes (as vLLM's human_readable_int)


def byte_count(text: str) -> int:
    """ "2147483648", "2G" (10^9), "2GiB" / "2Gi" (2^30), "512M", "1.5G" -> bytes."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]i?)?b?\s*", text, flags=re.IGNORECASE)
    if match is None:
        raise argparse.ArgumentTypeError(f"must be a number of bytes such as 2147483648, 512M or 2GiB, got {text!r}")
    number, unit = match.groups()
    return int(float(number) * _BYTE_UNITS[(unit or "").lower()])
