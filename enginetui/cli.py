"""The `enginetui` command: the live dashboard, and its subcommands (serve, attach, bench, replay, export, simulate).

The dashboard's own flags are parsed here; the engine flags (vLLM's names, the engine's
defaults) come from enginetui.flags.engine, which the subcommands use too. Building the parser
imports only flag definitions (no torch, no Textual, no server): `--help`, `--version` and a bad
flag value answer at once, and every engine flag value is checked by the engine's own validator
(core/config.py) before any engine process starts. Each subcommand's module adds its parsers;
what it runs is imported when it runs.
"""

import argparse
import importlib
import sys
from functools import partial

from enginetui.dashboard.logs import KEEP_LOGS
from enginetui.flags.dashboard import add_redraw_args, positive_int
from enginetui.flags.engine import (
    DASHBOARD_HELP,
    add_engine_args,
    dashboard_engine_args,
    dashboard_pool_rule,
    flag_problem,
    startup_problem,
)
from enginetui.interrupt import sigterm_quits

SUBCOMMANDS = (  # (module, function adding its subcommands to the top-level subparsers), in help order
    ("enginetui.bench.cli", "add_bench_subparsers"),  # bench throughput | latency | serve | profile
    ("enginetui.serve.cli", "add_server_subparsers"),  # serve, attach
    ("enginetui.replay.cli", "add_replay_subparser"),  # replay
    ("enginetui.export.cli", "add_export_subparser"),  # export
    ("enginetui.simulate.cli", "add_simulate_subparser"),  # simulate
)


class CommandParser(argparse.ArgumentParser):
    """argparse without abbreviations (`--num-gpu-blocks 48` is an error, not `--num-gpu-blocks-override`);
    subcommands' parsers are of this class too (argparse makes them of the parent's class)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)
        self.intermixed = False  # a subcommand sets this to take positionals after options (`FILE --format csv OUT`)
        self._intermixing = False  # inside parse_known_intermixed_args, which parses in two plain passes

    def parse_known_args(self, args=None, namespace=None):
        if not self.intermixed or self._intermixing:
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False


def version() -> str:
    """`enginetui X.Y.Z (python, torch, textual versions)`, from the installed packages' metadata."""
    from importlib import metadata

    def of(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "not installed"

    python = ".".join(map(str, sys.version_info[:3]))
    return f"enginetui {of('enginetui')} (python {python}, torch {of('torch')}, textual {of('textual')})"


class VersionAction(argparse.Action):
    """`--version`: prints version() and exits; the packages' metadata is read only then."""

    def __init__(self, option_strings, dest, **kwargs) -> None:
        super().__init__(
            option_strings,
            dest,
            nargs=0,
            default=argparse.SUPPRESS,
            help="print the version (and python's, torch's, textual's) and exit",
        )

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(version())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="enginetui",
        description="Live dashboard of a vLLM-V1-style inference engine: type prompts, watch it schedule.",
        epilog=(
            "While the dashboard runs, the engine's output (EngineCore's stdout, stderr, logging and "
            "warnings) goes to a log file, by default $XDG_CACHE_HOME/enginetui/engine-PID.log "
            f"(~/.cache/enginetui when XDG_CACHE_HOME is unset; the last {KEEP_LOGS} of these logs are kept, "
            "older ones are deleted); the help screen (?) shows its path."
        ),
    )
    parser.add_argument("--version", action=VersionAction)
    add_engine_args(parser, DASHBOARD_HELP)
    parser.add_argument(
        "--burst-size", type=positive_int, default=8, metavar="N", help="requests submitted by Ctrl-B (default: 8)"
    )
    parser.add_argument(
        "--log-file", metavar="PATH", help="where engine output goes (default: see the end of this help)"
    )
    parser.add_argument(
        "--step-interval-ms",
        type=_step_interval_ms,
        default=0,
        metavar="MS",
        help="start in slow motion: at least MS milliseconds between engine steps "
        "(PgDn and PgUp change it; default: 0, full speed)",
    )
    add_redraw_args(parser)  # --redraw-hz, --max-cpu
    parser.add_argument(
        "--record",
        metavar="FILE",
        help="record every step event to FILE while the dashboard runs (replay it with `enginetui replay FILE`)",
    )
    from enginetui.serve.cli import add_serve_beside_args

    add_serve_beside_args(parser)  # --serve PORT, --api-key
    subcommands = parser.add_subparsers(dest="command", title="subcommands", metavar="COMMAND")
    for module, function in SUBCOMMANDS:  # each subcommand sets `func(args) -> exit code`
        getattr(importlib.import_module(module), function)(subcommands)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    problem = unknown_flag(parser, argv)  # before argparse, which would blame the value that follows it
    if problem is not None:
        parser.error(problem)
    args = parser.parse_args(argv)
    args.argv = argv  # the command line after `enginetui`: a command that restarts itself reruns it
    problem = flag_problem(args)  # a value the engine would refuse, named by its flag: before anything starts
    if problem is not None:
        parser.error(problem)
    if args.command is not None:
        return args.func(args)
    return run_dashboard(args)


def unknown_flag(parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    """`--num-gpu-blocks 48` names no flag of any (sub)command: say so, and which flag it may mean
    (argparse would report `48` as an invalid COMMAND)."""
    known = option_strings(parser)
    for token in argv:
        if token == "--":
            break
        name = token.split("=", 1)[0]
        if name.startswith("--") and name not in known:
            longer = sorted(flag for flag in known if flag.startswith(name))
            hint = f"; did you mean {' or '.join(longer)}?" if longer else ""
            return f"unrecognized argument {name} (flags are never abbreviated{hint})"
    return None


def option_strings(parser: argparse.ArgumentParser) -> set[str]:
    """Every option string of `parser` and its subcommands, at any depth."""
    found: set[str] = set()
    for action in parser._actions:
        found.update(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= option_strings(sub)
    return found


def run_dashboard(args: argparse.Namespace) -> int:
    """Start the engine (before the screen takes over the terminal), then run the app on it.

    The engine's output goes to the log file from the start; this process's logging and
    warnings follow it there while the screen is up.
    """
    from enginetui.terminal_check import refuse_without_terminal

    if refuse_without_terminal("enginetui"):
        return 2
    kwargs = dashboard_engine_args(args)
    problem = startup_problem(kwargs)  # a model that is not there: said now, not after an engine process started
    if problem is not None:
        print(f"enginetui: {problem}", file=sys.stderr)
        return 2
    from enginetui.dashboard.app import EngineTUI
    from enginetui.dashboard.engine_link import open_engine, startup_error
    from enginetui.dashboard.logs import default_log_file, display_path, route_python_output
    from enginetui.flags import record as record_flag

    log_file = str(args.log_file or default_log_file())
    server = None
    if args.serve is not None:
        from enginetui.serve.cli import ServerBeside, api_key

        try:  # binds the port now: a taken one fails before the engine starts
            server = ServerBeside(args.serve, api_key(args), args.allow_control, args.max_pause_s)
        except OSError as exc:
            print(f"enginetui: --serve: {exc}", file=sys.stderr)
            return 2
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
    recorder = None
    if args.record:
        recorder = record_flag.start_or_say(engine, args.record, "enginetui")
        if recorder is None:
            engine.shutdown()
            return 2
    if server is not None:
        engine = server.wrap(engine)
    # Ctrl-R restarts a dead engine with the same settings; not behind --serve (the server keeps its engine)
    reopen = partial(open_engine, kwargs, log_file=log_file) if server is None else None
    app = EngineTUI(
        engine,
        burst_size=args.burst_size,
        seed=args.seed or 0,
        log_file=log_file,
        step_interval_ms=args.step_interval_ms,
        reopen=reopen,
        redraw_hz=args.redraw_hz,
        max_cpu_share=args.max_cpu / 100,
        random_weights=kwargs.get("load_format") == "dummy",
        serving=server.url if server is not None else None,
        pool_rule=dashboard_pool_rule(args),
    )
    try:
        with route_python_output(log_file), sigterm_quits(app):
            if server is None:
                app.run()
            else:
                server.run(app)  # the app and the server in one event loop, until the app quits
    finally:
        engine.shutdown()  # closes the recording too
        app.engine.shutdown()  # the engine of a restart (r), if there was one (not recorded)
    if recorder is not None:
        record_flag.close_and_say(recorder, "enginetui")
    return app.return_code or 0


def _step_interval_ms(text: str) -> int:
    from enginetui.core.engine.control import MAX_STEP_INTERVAL_S

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number of milliseconds, got {text!r}") from None
    if not 0 <= value <= MAX_STEP_INTERVAL_S * 1e3:
        raise argparse.ArgumentTypeError(f"must be between 0 and {MAX_STEP_INTERVAL_S * 1e3:.0f}, got {value}")
    return value
