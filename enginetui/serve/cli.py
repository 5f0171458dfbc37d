"""`enginetui serve` (the OpenAI-compatible server), `enginetui attach URL` (the dashboard on a
running server) and `enginetui --serve PORT` (dashboard and server on one engine, one process).

`enginetui/cli.py` calls `add_server_subparsers`; the heavy modules (asyncio too) are imported when a
command runs, so `enginetui --help` stays quick.
"""

import argparse
import contextlib
import os
import sys

from enginetui.interrupt import sigterm_interrupts

API_KEY_ENV = "ENGINETUI_API_KEY"  # the API key, when --api-key is not given (keeps it out of `ps`)
DEFAULT_PORT = 8000
# --max-pause-s: control_gate.DEFAULT_MAX_PAUSE_S, not imported (it would load asyncio into --help); a test holds them equal
DEFAULT_MAX_PAUSE_S = 300.0


def add_server_subparsers(subparsers: argparse._SubParsersAction) -> None:
    from enginetui.flags.engine import add_engine_args

    serve = subparsers.add_parser(
        "serve",
        help="serve the engine over an OpenAI-compatible HTTP API (like `vllm serve`)",
        description="An OpenAI-compatible server (/v1/completions, /v1/chat/completions, /v1/models, /health, "
        "/metrics, /tokenize, /detokenize) on one engine; dashboards attach to it with "
        "`enginetui attach URL`. Engine flags use vLLM's names. Ctrl-C or SIGTERM stops it.",
    )
    serve.add_argument(
        "model_tag",
        nargs="?",
        metavar="MODEL",
        help="the model, as `vllm serve MODEL` takes it (the same as --model MODEL)",
    )
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)"
    )
    serve.add_argument(
        "--port", type=_port, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: any free one)"
    )
    add_key_arg(serve, "require this key (header `Authorization: Bearer KEY`) on every route but /health")
    add_control_args(serve)
    serve.add_argument(
        "--served-model-name",
        metavar="NAME",
        help="the model name clients send (default: the --model value; the embedded model: its "
        "directory's path, as vLLM serves a local model, with 'default' accepted too)",
    )
    serve.add_argument(
        "--uvicorn-log-level",
        default="info",
        choices=("critical", "error", "warning", "info", "debug", "trace"),
        help="uvicorn's log level (default info)",
    )
    serve.add_argument(
        "--disable-uvicorn-access-log", action="store_true", help="no access-log line per request (vLLM's flag)"
    )
    serve.add_argument(
        "--disable-access-log-for-endpoints",
        type=_paths,
        default=frozenset(),
        metavar="PATHS",
        help="comma-separated paths whose requests are not logged, e.g. /health,/metrics (vLLM's "
        "flag; attached dashboards' polling is logged at debug level already)",
    )
    serve.add_argument(
        "--skip-tokenizer-init",
        action="store_true",
        help="no tokenizer: prompts are token ids, outputs carry no text (for models without one)",
    )
    serve.add_argument(
        "--record",
        metavar="FILE",
        help="record every step event to FILE while serving (replay it with `enginetui replay FILE`)",
    )
    add_engine_args(serve, subcommand=True)
    serve.set_defaults(func=run_serve)

    from enginetui.flags.dashboard import add_redraw_args, positive_int
    from enginetui.vllm_watch.cli import add_vllm_args

    attach = subparsers.add_parser(
        "attach",
        help="open the dashboard on a running `enginetui serve` (or, with --vllm, a real vLLM server)",
        description="The dashboard on a server's engine: every request, whoever sent it, with its prompt and "
        "streaming text; your prompts go through the server's OpenAI API. It watches; pause, step and "
        "slow motion act on the one engine where the server allows it (`enginetui serve "
        "--allow-control`), and every attached dashboard sees the same state. "
        "With --vllm: the dashboard on a real vLLM server, fed by its /metrics and KV cache events.",
    )
    attach.add_argument("url", nargs="?", help="the server, e.g. http://127.0.0.1:8000 (with --vllm URL: none)")
    add_key_arg(attach, "the server's API key")
    attach.add_argument("--burst-size", type=positive_int, default=8, help="requests submitted by Ctrl-B (default 8)")
    add_redraw_args(attach)
    add_vllm_args(attach)  # --vllm, --kv-events, --kv-replay, --tokenizer
    attach.add_argument(
        "--probe",
        metavar="ADDR",
        help="watch a real vLLM from inside: the step events its scheduler probe publishes "
        "(vLLM started with --scheduler-cls enginetui.vllm_probe.ProbeAsyncScheduler and "
        "ENGINETUI_PROBE=ADDR, e.g. tcp://127.0.0.1:5600); the same screens as for our engine, "
        "watch only. With --vllm URL: that server's /metrics, prefix cache and proxy beside them, and the "
        "outside rebuild scored against the probe; with --record FILE: the probe's step events, "
        "in the format `enginetui --record` writes",
    )
    attach.set_defaults(func=run_attach)


def add_control_args(parser: argparse.ArgumentParser) -> None:
    """Whether attached dashboards may control the served engine, and for how long a pause lasts."""
    parser.add_argument(
        "--allow-control",
        action="store_true",
        help="let attached dashboards pause, step, slow down and reset the engine (default: they "
        "watch only); each such call is logged with who made it",
    )
    parser.add_argument(
        "--max-pause-s",
        type=_positive_seconds,
        default=DEFAULT_MAX_PAUSE_S,
        metavar="S",
        help="a pause ends after S seconds at the latest (default %(default)g); it also ends when "
        "the dashboard that made it detaches",
    )


def add_key_arg(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument("--api-key", metavar="KEY", help=f"{help_text} (default: ${API_KEY_ENV})")


def api_key(args: argparse.Namespace) -> str | None:
    return args.api_key or os.environ.get(API_KEY_ENV) or None


def run_serve(args: argparse.Namespace) -> int:
    """Bind the port, start the engine, serve until Ctrl-C / SIGTERM, then end the engine."""
    from enginetui.flags.engine import engine_args, startup_problem

    kwargs = engine_args(args)
    if args.skip_tokenizer_init:
        kwargs["skip_tokenizer_init"] = True
    problem = startup_problem(kwargs)  # a model that is not there: said now, not after an engine process started
    if problem is not None:
        print(f"enginetui serve: {problem}", file=sys.stderr)
        return 2
    from enginetui.core.engine.async_llm import AsyncLLM
    from enginetui.core.entrypoints.openai.api_server import build_app, listen_socket, serve_app
    from enginetui.dashboard.engine_link import startup_error
    from enginetui.flags import record as record_flag

    try:
        sock = listen_socket(args.host, args.port)
    except OSError as exc:
        print(f"enginetui serve: {exc}", file=sys.stderr)
        return 2
    print(f"enginetui serve: starting the engine ({kwargs['model'] or 'embedded default model'})…", file=sys.stderr)
    try:
        engine = AsyncLLM.from_engine_args(**kwargs)
    except Exception as exc:  # bad model or flags, EngineCore failing to start: one line, no traceback
        sock.close()
        print(f"enginetui serve: could not start the engine: {startup_error(exc, kwargs)}", file=sys.stderr)
        return 2
    recorder = record_flag.start_or_say(engine, args.record, "enginetui serve") if args.record else None
    if args.record and recorder is None:
        engine.shutdown()
        sock.close()
        return 2
    app = None
    with sigterm_interrupts():  # SIGTERM ends like Ctrl-C: the engine is shut down
        try:
            app = build_app(
                engine,
                args.served_model_name,
                api_key(args),
                allow_control=args.allow_control,
                max_pause_s=args.max_pause_s,
                access_log=not args.disable_uvicorn_access_log,
                access_log_excluded=args.disable_access_log_for_endpoints,
            )
            host, port = sock.getsockname()[:2]
            key_note = " (API key required)" if api_key(args) else ""
            key_note += "; dashboards may control the engine" if args.allow_control else "; dashboards watch only"
            print(
                f"enginetui serve: serving {app.state.served.name!r} on http://{_url_host(host)}:{port}{key_note}; "
                f"Ctrl-C stops",
                file=sys.stderr,
                flush=True,
            )
            warning = exposure_warning(host, port, bool(api_key(args)), args.allow_control)
            if warning:
                print(f"enginetui serve: warning: {warning}", file=sys.stderr, flush=True)
            import gc

            # Everything made so far (torch, the tokenizer, the app) lives as long as the server: frozen,
            # it is not scanned again by each full collection that serving's allocations set off (as vLLM's).
            gc.collect()
            gc.freeze()
            run_event_loop(serve_app(app, sock, log_level=args.uvicorn_log_level))
        except KeyboardInterrupt:
            pass
        finally:
            engine.shutdown()  # closes the recording too
    if recorder is not None:
        record_flag.close_and_say(recorder, "enginetui serve")
    ended = app.state.ended_at_stop if app is not None else 0
    note = f" ({_requests(ended)} still open ended with finish reason 'abort')" if ended else ""
    print(f"enginetui serve: stopped{note}", file=sys.stderr)
    return 0


def run_event_loop(main) -> None:
    """asyncio.run(main), on uvloop where it is installed, as vLLM's server runs: each chunk sent and
    each engine output read wakes the loop, and uvloop's wake costs the front-end less CPU."""
    try:
        import uvloop
    except ImportError:
        import asyncio

        asyncio.run(main)
        return
    uvloop.run(main)


def add_serve_beside_args(parser: argparse.ArgumentParser) -> None:
    """The dashboard's own flags for serving its engine too."""
    parser.add_argument(
        "--serve",
        type=_port,
        metavar="PORT",
        help="also serve the dashboard's engine over the OpenAI-compatible API on 127.0.0.1:PORT "
        "(as `enginetui serve` does; others can `enginetui attach` to it)",
    )
    add_key_arg(parser, "with --serve: require this key on every route but /health")
    add_control_args(parser)


class ServerBeside:
    """`enginetui --serve PORT`: the server on the dashboard's engine, in the dashboard's event loop.

    Made before the engine starts (it binds the port: a taken one fails first); wrap() the engine
    so the dashboard's own requests count in /metrics too; run() the app with the server beside it.
    """

    def __init__(
        self, port: int, api_key: str | None, allow_control: bool = False, max_pause_s: float | None = None
    ) -> None:
        from enginetui.core.entrypoints.openai.api_server import listen_socket

        self.sock = listen_socket("127.0.0.1", port)  # raises OSError when the port is taken
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"  # where it serves
        self.api_key = api_key  # guards the server's routes
        self.allow_control = allow_control  # attached dashboards may control the engine (else: watch only)
        self.max_pause_s = max_pause_s  # a pause by an attached dashboard ends after this long (None: the default)
        self.http_app = None  # the FastAPI app, once wrap() has the engine

    def wrap(self, engine):
        """The engine the dashboard and the server share (its generate() feeds /metrics)."""
        from enginetui.core.entrypoints.openai.api_server import build_app
        from enginetui.core.entrypoints.openai.metrics import MeteredEngine, ServerMetrics
        from enginetui.core.entrypoints.openai.served_model import default_served_name

        engine = MeteredEngine(
            engine, ServerMetrics(default_served_name(engine), engine.info, getattr(engine, "config", None))
        )
        limit = {} if self.max_pause_s is None else {"max_pause_s": self.max_pause_s}
        self.http_app = build_app(engine, api_key=self.api_key, allow_control=self.allow_control, **limit)
        return engine

    def run(self, app) -> None:
        """Run the dashboard `app` until it quits, serving meanwhile."""
        import asyncio

        async def both() -> None:
            async with self.serving():
                announce = asyncio.ensure_future(self._announce(app))
                try:
                    await app.run_async()
                finally:
                    announce.cancel()

        asyncio.run(both())

    @contextlib.asynccontextmanager
    async def serving(self):
        """The server runs in this event loop while inside; it stops (open streams get a moment) on the way out."""
        import asyncio

        from enginetui.core.entrypoints.openai.api_server import serve_app

        stop = asyncio.Event()
        server = asyncio.ensure_future(serve_app(self.http_app, self.sock, stop, log_level="warning"))
        try:
            yield self
        finally:
            stop.set()
            await asyncio.gather(server, return_exceptions=True)

    async def _announce(self, app) -> None:
        import asyncio

        while not app.is_running:
            await asyncio.sleep(0.05)
        key = " (API key required)" if self.api_key else ""
        app.notify(f"serving this engine on {self.url}{key}: `enginetui attach {self.url}`", title="server", timeout=10)


def run_attach(args: argparse.Namespace) -> int:
    from enginetui.terminal_check import refuse_without_terminal
    from enginetui.vllm_watch.cli import run_vllm_watch, vllm_only_flags

    if args.probe:  # a real vLLM through its scheduler probe (with --vllm URL: its /metrics beside)
        from enginetui.vllm_probe.cli import run_probe

        return run_probe(args, api_key(args))
    if args.vllm:
        return run_vllm_watch(args.url, args, api_key(args))
    if vllm_only_flags(args):
        print(f"enginetui attach: {', '.join(vllm_only_flags(args))} only apply with --vllm", file=sys.stderr)
        return 2
    if not args.url:
        print("enginetui attach: give the server's URL, e.g. enginetui attach http://127.0.0.1:8000", file=sys.stderr)
        return 2
    if refuse_without_terminal("enginetui attach"):
        return 2
    from enginetui.serve.remote_engine import attach_dashboard

    return attach_dashboard(
        args.url, api_key(args), burst_size=args.burst_size, redraw_hz=args.redraw_hz, max_cpu_share=args.max_cpu / 100
    )


def _requests(count: int) -> str:
    return f"{count} request" + ("" if count == 1 else "s")


def exposure_warning(host: str, port: int, keyed: bool, allow_control: bool) -> str | None:
    """What to say when the server listens beyond this machine with no API key (None: it does not)."""
    import ipaddress

    if keyed or ipaddress.ip_address(host.split("%")[0]).is_loopback:
        return None
    control = " and control the engine (--allow-control)" if allow_control else ""
    return (
        f"listening on {host} without --api-key: anyone who can reach port {port} of this machine can send "
        f"requests{control}; give --api-key KEY (or ${API_KEY_ENV}), or leave --host at 127.0.0.1"
    )


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number 0-65535, got {value}")
    return value


def _paths(text: str) -> frozenset[str]:
    """`/health,/metrics` -> the paths (each must start with /, as a request's path does)."""
    paths = frozenset(p.strip() for p in text.split(",") if p.strip())
    wrong = sorted(p for p in paths if not p.startswith("/"))
    if wrong:
        raise argparse.ArgumentTypeError(f"paths start with '/', got {', '.join(wrong)}")
    return paths
