"""The flags of `enginetui attach --vllm URL` and what runs it."""

import argparse
import sys
from urllib.parse import urlsplit

VLLM_KV_PORT = 5557  # vLLM's default KV events endpoint is tcp://*:5557


def add_vllm_args(parser: argparse.ArgumentParser) -> None:
    """`--vllm` and its companions, on the attach subcommand."""
    group = parser.add_argument_group("watching a real vLLM server (--vllm)")
    group.add_argument("--vllm", action="store_true",
                       help="URL is a real vLLM OpenAI server (`vllm serve`): watch its /metrics and KV cache "
                            "events, send it prompts")
    group.add_argument("--kv-events", metavar="ENDPOINT",
                       help=f"where vLLM publishes its KV events (its --kv-events-config endpoint), e.g. "
                            f"tcp://HOST:{VLLM_KV_PORT} or ipc:///path; data-parallel rank r is read at port + r "
                            f"(default: tcp://URL's host:{VLLM_KV_PORT}; 'none': don't listen)")
    group.add_argument("--kv-replay", metavar="ENDPOINT",
                       help="vLLM's KV events replay endpoint (its replay_endpoint), to catch up on the cache's "
                            "history and on batches missed (default: none)")
    group.add_argument("--tokenizer", metavar="DIR",
                       help="decode cached blocks with this tokenizer (default: the served model's, when its "
                            "path from /v1/models is on this machine)")


def vllm_only_flags(args: argparse.Namespace) -> list[str]:
    """The --vllm companions given (they mean nothing on an `enginetui serve`)."""
    given = {"--kv-events": args.kv_events, "--kv-replay": args.kv_replay, "--tokenizer": args.tokenizer}
    return [flag for flag, value in given.items() if value is not None]


def kv_endpoint(url: str, flag: str | None) -> str | None:
    """The KV events endpoint to listen to: the flag, else vLLM's default port on the server's host."""
    if flag is not None:
        return None if flag.lower() == "none" else flag
    return f"tcp://{urlsplit(url).hostname}:{VLLM_KV_PORT}"


def check_url(url: str) -> str | None:
    """Why `url` cannot be a server address (None: it can)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{url!r} is not a server address: give it as http://HOST:PORT"
    return None


def run_vllm_watch(url: str, args: argparse.Namespace, api_key: str | None) -> int:
    """`enginetui attach --vllm URL`: the dashboard on that server until q."""
    from enginetui.vllm_watch.app import VllmWatchApp

    problem = check_url(url) or _check_endpoint(args.kv_events) or _check_endpoint(args.kv_replay)
    if problem:
        print(f"enginetui attach --vllm: {problem}", file=sys.stderr)
        return 2
    from enginetui.terminal_check import refuse_without_terminal

    if refuse_without_terminal("enginetui attach --vllm"):
        return 2
    app = VllmWatchApp(url, kv_events=kv_endpoint(url, args.kv_events), kv_replay=args.kv_replay, api_key=api_key,
                       tokenizer=args.tokenizer, burst_size=args.burst_size, redraw_hz=args.redraw_hz,
                       max_cpu_share=args.max_cpu / 100)
    app.run()
    return app.return_code or 0


def _check_endpoint(endpoint: str | None) -> str | None:
    if endpoint is None or endpoint.lower() == "none" or endpoint.startswith(("tcp://", "ipc://")):
        return None
    return f"{endpoint!r} is not a ZMQ endpoint: give it as tcp://HOST:PORT or ipc:///path"
