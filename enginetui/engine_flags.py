"""The engine's command-line flags (vLLM's names) and their defaults, in one place.

`enginetui` (cli.py), its dashboard (app.py) and `enginetui bench` take them from here. Each
flag's default is the engine's own (core.config.EngineConfig), written into its help text; the
dashboard's one default of its own, a small KV pool, is here too.
"""

import argparse
from dataclasses import dataclass, field, fields
from typing import Any

from core.config import EngineConfig

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
    EngineFlag("--tokenizer", "tokenizer directory or hub id",
               unset="the model's; with --load-format dummy and no tokenizer, the embedded model's when the "
                     "vocabulary fits, else a byte-level one", kwargs={"metavar": "DIR"}),
    EngineFlag("--max-num-batched-tokens", "token budget of one step", kwargs={"type": int, "metavar": "N"}),
    EngineFlag("--max-num-seqs", "most requests running at once", kwargs={"type": int, "metavar": "N"}),
    EngineFlag("--block-size", "tokens per KV block", kwargs={"type": int, "metavar": "N"}),
    EngineFlag("--num-gpu-blocks-override", "KV pool size in blocks", unset="sized from the KV memory",
               kwargs={"type": int, "metavar": "N"}),
    EngineFlag("--enable-chunked-prefill", "split long prompts over steps",
               kwargs={"action": argparse.BooleanOptionalAction}),
    EngineFlag("--enable-prefix-caching", "reuse KV of shared prefixes",
               kwargs={"action": argparse.BooleanOptionalAction}),
    EngineFlag("--scheduling-policy", "fcfs or priority (lower priority value runs first)",
               kwargs={"choices": ("fcfs", "priority")}),
    EngineFlag("--scheduler-reserve-full-isl", "admit a waiting request only if its whole prompt fits in free "
               "blocks (vLLM >= 0.23; off: only its first chunk must, as vLLM 0.22)",
               kwargs={"action": argparse.BooleanOptionalAction}),
    EngineFlag("--long-prefill-token-threshold", "cap on one request's prefill tokens per step while others "
               "run (0: no cap)", kwargs={"type": int, "metavar": "N"}),
    EngineFlag("--max-model-len", "longest prompt + output in tokens", unset="the model's max positions",
               kwargs={"type": int, "metavar": "N"}),
    EngineFlag("--dtype", "weights / activations dtype: auto (float32 on CPU, the checkpoint's on CUDA), "
               "float32, float16, bfloat16"),
    EngineFlag("--load-format", "dummy: random weights, no download", kwargs={"choices": ("auto", "dummy")}),
    EngineFlag("--seed", "engine random seed (dummy weights, requests without a seed)", kwargs={"type": int}),
    EngineFlag("--device", "cpu, cuda, or auto (cuda when available)"),
    EngineFlag("--cpu-threads", "threads EngineCore computes with on CPU",
               unset="$OMP_NUM_THREADS, else every usable core less --cpu-reserved-cores",
               kwargs={"type": int, "metavar": "N"}),
    EngineFlag("--cpu-reserved-cores", "usable cores left to the front-end (client, dashboard) when --cpu-threads "
               "is not given", kwargs={"type": int, "metavar": "N"}),
    EngineFlag("--cpu-spin-count", "OpenMP spin loops before a waiting EngineCore thread sleeps (GOMP_SPINCOUNT)",
               unset="$GOMP_SPINCOUNT (or $OMP_WAIT_POLICY), else 10000", kwargs={"type": int, "metavar": "N"}),
)

DASHBOARD_NUM_BLOCKS = 512  # the dashboard's KV pool when --num-gpu-blocks-override is not given
POOL_HINT = (  # how the help screen explains the pool size
    f"dashboard default {DASHBOARD_NUM_BLOCKS} blocks so pages are visible; "
    "pass --num-gpu-blocks-override N to change it"
)
DASHBOARD_HELP = {  # the dashboard's own wording of some engine flags (bench keeps the engine's)
    "--num-gpu-blocks-override": f"KV pool size in blocks (default: {DASHBOARD_NUM_BLOCKS} in the dashboard, so "
    "pages are visible; the engine's own default sizes the pool from the KV memory)",
    "--seed": "engine random seed (dummy weights, requests without a seed); also picks the prompts and lengths "
    f"of b bursts (default: {ENGINE_DEFAULTS['seed']})",
}


def add_engine_args(parser: argparse.ArgumentParser, help_overrides: dict[str, str] | None = None,
                    subcommand: bool = False) -> None:
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
    """AsyncLLM.from_engine_args keywords: the model (None = default) and every flag given."""
    chosen = {spec.dest: getattr(args, spec.dest, None) for spec in ENGINE_FLAGS}
    return {k: v for k, v in chosen.items() if v is not None or k == "model"}


def dashboard_engine_args(args: argparse.Namespace) -> dict[str, Any]:
    """engine_args() plus the dashboard's own default: a pool small enough to see its pages."""
    kwargs = engine_args(args)
    kwargs.setdefault("num_gpu_blocks_override", DASHBOARD_NUM_BLOCKS)
    return kwargs
