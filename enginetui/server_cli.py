"""`enginetui serve`: the OpenAI-compatible server.

`enginetui/cli.py` calls `add_server_subparsers`; the heavy modules are imported when a command runs.
"""

import argparse
import asyncio
import os
import signal
import sys

API_KEY_ENV = "ENGINETUI_API_KEY"  # the API key, when --api-key is not given (keeps it out of `ps`)
DEFAULT_PORT = 8000


def add_server_subparsers(subparsers: argparse._SubParsersAction) -> None:
    from enginetui.engine_flags import add_engine_args

    serve = subparsers.add_parser(
        "serve", help="serve the engine over an OpenAI-compatible HTTP API (like `vllm serve`)",
        description="An OpenAI-compatible server (/v1/completions, /v1/chat/completions, /v1/models, /health, "
                    "/metrics, /tokenize, /detokenize) on one engine. Engine flags use vLLM's names. Ctrl-C or "
                    "SIGTERM stops it.")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    serve.add_argument("--port", type=_port, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: any free one)")
    add_key_arg(serve, "require this key (header `Authorization: Bearer KEY`) on every route but /health")
    serve.add_argument("--served-model-name", metavar="NAME",
                       help="the model name clients send (default: the --model value, or 'default')")
    serve.add_argument("--uvicorn-log-level", default="info",
                       choices=("critical", "error", "warning", "info", "debug", "trace"),
                       help="uvicorn's log level (default info)")
    add_engine_args(serve, subcommand=True)
    serve.set_defaults(func=run_serve)


def add_key_arg(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument("--api-key", metavar="KEY", help=f"{help_text} (default: ${API_KEY_ENV})")


def api_key(args: argparse.Namespace) -> str | None:
    return args.api_key or os.environ.get(API_KEY_ENV) or None


def run_serve(args: argparse.Namespace) -> int:
    """Bind the port, start the engine, serve until Ctrl-C / SIGTERM, then end the engine."""
    from core.engine.async_llm import AsyncLLM
    from core.entrypoints.openai.api_server import build_app, listen_socket, serve_app
    from enginetui.engine_flags import engine_args
    from enginetui.engine_link import startup_error

    kwargs = engine_args(args)
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
    previous = signal.signal(signal.SIGTERM, _interrupt)  # SIGTERM ends like Ctrl-C: the engine is shut down
    try:
        app = build_app(engine, args.served_model_name or args.model, api_key(args))
        host, port = sock.getsockname()[:2]
        key_note = " (API key required)" if api_key(args) else ""
        print(f"enginetui serve: serving {app.state.served.name!r} on http://{_url_host(host)}:{port}{key_note}; "
              f"Ctrl-C stops", file=sys.stderr, flush=True)
        asyncio.run(serve_app(app, sock, log_level=args.uvicorn_log_level))
    except KeyboardInterrupt:
        pass
    finally:
        engine.shutdown()
        signal.signal(signal.SIGTERM, previous)
    print("enginetui serve: stopped", file=sys.stderr)
    return 0


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number 0-65535, got {value}")
    return value
