"""The `enginetui` command: the live dashboard, plus `enginetui bench ...` from enginetui.bench.

All argument parsing lives here. Engine flags use vLLM's names; `add_engine_args` lets the
bench subcommands take the same flags.
"""

import argparse
import importlib.util
import sys
from typing import Any

# (flag, argparse keyword arguments) of every engine flag; dest is the AsyncLLM keyword.
ENGINE_FLAGS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("--model", {"help": "HF model directory or hub id (default: the embedded default model)"}),
    ("--max-num-batched-tokens", {"type": int, "help": "token budget of one step"}),
    ("--max-num-seqs", {"type": int, "help": "most requests running at once"}),
    ("--block-size", {"type": int, "help": "tokens per KV block"}),
    ("--num-gpu-blocks-override", {"type": int, "help": "KV pool size in blocks"}),
    ("--enable-chunked-prefill", {"action": argparse.BooleanOptionalAction, "help": "split long prompts over steps"}),
    ("--enable-prefix-caching", {"action": argparse.BooleanOptionalAction, "help": "reuse KV of shared prefixes"}),
    ("--max-model-len", {"type": int, "help": "longest prompt + output in tokens"}),
    ("--dtype", {"help": "weights / activations dtype (auto, float32, float16, bfloat16)"}),
    ("--load-format", {"choices": ("auto", "dummy"), "help": "dummy: random weights, no download"}),
    ("--seed", {"type": int, "help": "engine random seed"}),
    ("--device", {"help": "cpu, cuda, or auto"}),
)


def add_engine_args(parser: argparse.ArgumentParser) -> None:
    """Add the engine flags (vLLM names) to `parser`."""
    group = parser.add_argument_group("engine")
    for flag, kwargs in ENGINE_FLAGS:
        group.add_argument(flag, default=None, **kwargs)


def engine_args(args: argparse.Namespace) -> dict[str, Any]:
    """AsyncLLM.from_engine_args keywords: the model (None = default) and every flag given."""
    chosen = {name: getattr(args, name) for name in (flag[2:].replace("-", "_") for flag, _ in ENGINE_FLAGS)}
    return {k: v for k, v in chosen.items() if v is not None or k == "model"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="enginetui",
        description="Live dashboard of a vLLM-V1-style inference engine: type prompts, watch it schedule.",
    )
    add_engine_args(parser)
    parser.add_argument("--burst-size", type=int, default=8, help="requests submitted by the b key (default 8)")
    subcommands = parser.add_subparsers(dest="command", title="subcommands", metavar="COMMAND")
    if importlib.util.find_spec("enginetui.bench") is not None:
        from enginetui.bench import add_bench_subparsers

        add_bench_subparsers(subcommands)  # each subcommand sets `func(args) -> exit code`
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command is not None:
        return args.func(args)
    return run_dashboard(args)


def run_dashboard(args: argparse.Namespace) -> int:
    """Start the engine (before the screen takes over the terminal), then run the app on it."""
    from enginetui.app import EngineTUI, describe
    from enginetui.engine_link import open_engine

    kwargs = engine_args(args)
    print(f"enginetui: starting the engine ({kwargs['model'] or 'embedded default model'})…", file=sys.stderr)
    try:
        engine = open_engine(kwargs)
    except Exception as exc:  # bad model path or config, EngineCore failing to start: one line, no traceback
        print(f"enginetui: could not start the engine: {describe(exc)}", file=sys.stderr)
        return 2
    try:
        app = EngineTUI(engine, burst_size=args.burst_size)
        app.run()
    finally:
        engine.shutdown()
    return app.return_code or 0
