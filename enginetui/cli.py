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
    ("--tokenizer", {"metavar": "DIR", "help": "tokenizer directory or hub id (default: the model's)"}),
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


DASHBOARD_NUM_BLOCKS = 512  # the dashboard's KV pool when --num-gpu-blocks-override is not given
POOL_HINT = (  # how the help screen explains the pool size
    f"dashboard default {DASHBOARD_NUM_BLOCKS} blocks so pages are visible; "
    "pass --num-gpu-blocks-override N to change it"
)
DASHBOARD_HELP = {  # the dashboard's own wording of some engine flags (bench keeps the plain one)
    "--num-gpu-blocks-override": f"KV pool size in blocks (dashboard default {DASHBOARD_NUM_BLOCKS} blocks so "
    "pages are visible; the engine's own default sizes the pool from memory)",
    "--seed": "engine random seed (also picks the prompts and lengths of b bursts; default 0)",
}


def add_engine_args(parser: argparse.ArgumentParser, help_overrides: dict[str, str] | None = None,
                    subcommand: bool = False) -> None:
    """Add the engine flags (vLLM names) to `parser`; `help_overrides` rewords some flags' help.

    A subcommand's flags leave unset values alone, so `enginetui --model M bench ...` keeps M.
    """
    group = parser.add_argument_group("engine")
    default = argparse.SUPPRESS if subcommand else None
    for flag, kwargs in ENGINE_FLAGS:
        if help_overrides and flag in help_overrides:
            kwargs = {**kwargs, "help": help_overrides[flag]}
        group.add_argument(flag, default=default, **kwargs)


def engine_args(args: argparse.Namespace) -> dict[str, Any]:
    """AsyncLLM.from_engine_args keywords: the model (None = default) and every flag given."""
    chosen = {name: getattr(args, name, None) for name in (flag[2:].replace("-", "_") for flag, _ in ENGINE_FLAGS)}
    return {k: v for k, v in chosen.items() if v is not None or k == "model"}


def dashboard_engine_args(args: argparse.Namespace) -> dict[str, Any]:
    """engine_args() plus the dashboard's own default: a pool small enough to see its pages."""
    kwargs = engine_args(args)
    kwargs.setdefault("num_gpu_blocks_override", DASHBOARD_NUM_BLOCKS)
    return kwargs


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="enginetui",
        description="Live dashboard of a vLLM-V1-style inference engine: type prompts, watch it schedule.",
        epilog=(
            "While the dashboard runs, the engine's output (EngineCore's stdout, stderr, logging and "
            "warnings) goes to a log file, by default $XDG_CACHE_HOME/enginetui/engine-PID.log "
            "(~/.cache/enginetui when XDG_CACHE_HOME is unset); the help screen (?) shows its path."
        ),
    )
    add_engine_args(parser, DASHBOARD_HELP)
    parser.add_argument("--burst-size", type=int, default=8, help="requests submitted by the b key (default 8)")
    parser.add_argument("--log-file", metavar="PATH", help="where engine output goes (default: see below)")
    parser.add_argument("--step-interval-ms", type=_step_interval_ms, default=0, metavar="MS",
                        help="start in slow motion: at least MS milliseconds between engine steps "
                             "(the - and + keys change it; default 0, full speed)")
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
    """Start the engine (before the screen takes over the terminal), then run the app on it.

    The engine's output goes to the log file from the start; this process's logging and
    warnings follow it there while the screen is up.
    """
    from enginetui.app import EngineTUI
    from enginetui.engine_link import open_engine
    from enginetui.logs import default_log_file, display_path, route_python_output

    kwargs = dashboard_engine_args(args)
    log_file = str(args.log_file or default_log_file())
    print(
        f"enginetui: starting the engine ({kwargs['model'] or 'embedded default model'}); "
        f"its output goes to {display_path(log_file)}…",
        file=sys.stderr,
    )
    try:
        engine = open_engine(kwargs, log_file=log_file)
    except Exception as exc:  # bad model path or config, EngineCore failing to start: one line, no traceback
        print(f"enginetui: could not start the engine: {startup_error(exc, kwargs)}", file=sys.stderr)
        return 2
    try:
        app = EngineTUI(engine, burst_size=args.burst_size, seed=args.seed or 0, log_file=log_file,
                        step_interval_ms=args.step_interval_ms)
        with route_python_output(log_file):
            app.run()
    finally:
        engine.shutdown()
    return app.return_code or 0


def startup_error(exc: BaseException, kwargs: dict[str, Any]) -> str:
    """One line for an engine that did not start; points at --tokenizer when the tokenizer is what is missing."""
    from core.models.loader import ModelLoadError
    from enginetui.app import describe

    tokenizer = kwargs.get("tokenizer")
    if isinstance(exc, ModelLoadError) and "tokenizer" in str(exc) and not tokenizer:
        return (
            f"no tokenizer found for {kwargs.get('model')!r} (not available locally, or the model has none): "
            "pass --tokenizer DIR with a tokenizer directory"
        )
    if isinstance(exc, ModelLoadError) and tokenizer and repr(tokenizer) in str(exc):  # the --tokenizer path
        return f"--tokenizer {tokenizer}: {describe(exc)}"
    return describe(exc)


def _step_interval_ms(text: str) -> int:
    from core.engine.wire import MAX_STEP_INTERVAL_S

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number of milliseconds, got {text!r}") from None
    if not 0 <= value <= MAX_STEP_INTERVAL_S * 1e3:
        raise argparse.ArgumentTypeError(f"must be between 0 and {MAX_STEP_INTERVAL_S * 1e3:.0f}, got {value}")
    return value
