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
    group.add_argument("--max-num-seqs", type=int, metavar="N",
                       help="vLLM's --max-num-seqs, shown beside its queues (vLLM does not publish it)")
    group.add_argument("--max-num-batched-tokens", type=int, metavar="N",
                       help="vLLM's --max-num-batched-tokens, shown beside its tokens per step (not published either)")
    group.add_argument("--proxy-port", type=int, metavar="PORT",
                       help="also serve vLLM's OpenAI API on this port (0: any free one) and pass every request "
                            "through: each client pointed here is listed, request by request (default: no proxy)")
    group.add_argument("--proxy-host", default="127.0.0.1", metavar="HOST",
                       help="the proxy's address (default 127.0.0.1: this machine only)")
    group.add_argument("--tokenizer", metavar="DIR",
                       help="decode cached blocks with this tokenizer (default: the served model's, when its "
                            "path from /v1/models is on this machine)")


def vllm_only_flags(args: argparse.Namespace) -> list[str]:
    """The --vllm companions given (they mean nothing on an `enginetui serve`)."""
    given = {"--kv-events": args.kv_events, "--kv-replay": args.kv_replay, "--tokenizer": args.tokenizer,
             "--max-num-seqs": args.max_num_seqs, "--max-num-batched-tokens": args.max_num_batched_tokens,
             "--proxy-port": args.proxy_port}
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
    from enginetui.vllm_watch.state import SchedulerLimits

    problem = check_url(url) or _check_endpoint(args.kv_events) or _check_endpoint(args.kv_replay) or \
        _check_limits(args) or _check_port(args.proxy_port)
    if problem:
        print(f"enginetui attach --vllm: {problem}", file=sys.stderr)
        return 2
    from enginetui.terminal_check import refuse_without_terminal

    if refuse_without_terminal("enginetui attach --vllm"):
        return 2
    app = VllmWatchApp(url, kv_events=kv_endpoint(url, args.kv_events), kv_replay=args.kv_replay, api_key=api_key,
                       tokenizer=args.tokenizer, burst_size=args.burst_size, redraw_hz=args.redraw_hz,
                       max_cpu_share=args.max_cpu / 100,
                       limits=SchedulerLimits(args.max_num_seqs, args.max_num_batched_tokens),
                       proxy=(args.proxy_host, args.proxy_port) if args.proxy_port is not None else None)
    app.run()
    return app.return_code or 0


def _check_endpoint(endpoint: str | None) -> str | None:
    if endpoint is None or endpoint.lower() == "none" or endpoint.startswith(("tcp://", "ipc://")):
        return None
    return f"{endpoint!r} is not a ZMQ endpoint: give it as tcp://HOST:PORT or ipc:///path"


def _check_limits(args: argparse.Namespace) -> str | None:
    for flag, value in (("--max-num-seqs", args.max_num_seqs), ("--max-num-batched-tokens", args.max_num_batched_tokens)):
        if value is not None and value < 1:
            return f"{flag} must be a positive integer, got {value}"
    return None


def _check_port(port: int | None) -> str | None:
    if port is not None and not 0 <= port <= 65535:
        return f"--proxy-port must be a port number (0-65535), got {port}"
    return None
