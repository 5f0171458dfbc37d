"""The flags of `enginetui attach --vllm URL` and what runs it."""

import argparse
import os
import sys
from urllib.parse import urlsplit

from enginetui.interrupt import sigterm_quits

VLLM_KV_PORT = 5557  # vLLM's default KV events endpoint is tcp://*:5557


def add_vllm_args(parser: argparse.ArgumentParser) -> None:
    """`--vllm` and its companions, on the attach subcommand."""
    group = parser.add_argument_group("watching a real vLLM server (--vllm)")
    group.add_argument(
        "--vllm",
        metavar="URL",
        nargs="?",
        action="append",
        const="",
        help="watch a real vLLM OpenAI server (`vllm serve`) on the dashboard: its scheduler rebuilt from "
        "outside (inferred; --probe ADDR: exact), its /metrics and KV cache events. `attach URL --vllm` or "
        "`attach --vllm URL`; given several times (one per replica), the fleet view: a panel per replica "
        "and which prefixes are cached where",
    )
    group.add_argument(
        "--kv-events",
        metavar="ENDPOINT",
        action="append",
        help=f"where vLLM publishes its KV events (its --kv-events-config endpoint), e.g. "
        f"tcp://HOST:{VLLM_KV_PORT} or ipc:///path; data-parallel rank r is read at port + r "
        f"(default: tcp://URL's host:{VLLM_KV_PORT}; 'none': don't listen); once per --vllm URL, "
        f"in their order, for a fleet",
    )
    group.add_argument(
        "--kv-replay",
        metavar="ENDPOINT",
        action="append",
        help="vLLM's KV events replay endpoint (its replay_endpoint), to catch up on the cache's "
        "history and on batches missed (default: none); once per --vllm URL for a fleet",
    )
    group.add_argument(
        "--max-num-seqs",
        type=int,
        metavar="N",
        help="vLLM's --max-num-seqs, shown beside its queues (vLLM does not publish it)",
    )
    group.add_argument(
        "--max-num-batched-tokens",
        type=int,
        metavar="N",
        help="vLLM's --max-num-batched-tokens, shown beside its tokens per step (not published either)",
    )
    group.add_argument(
        "--proxy-port",
        type=int,
        metavar="PORT",
        help="also serve vLLM's OpenAI API on this port (0: any free one) and pass every request "
        "through: each client pointed here is listed, request by request (default: no proxy)",
    )
    group.add_argument(
        "--proxy-host",
        default="127.0.0.1",
        metavar="HOST",
        help="the proxy's address (default 127.0.0.1: this machine only)",
    )
    group.add_argument(
        "--record",
        metavar="FILE",
        help="record the session to FILE in our engine's recording format: the step events (the probe's with "
        "--probe ADDR, else the rebuild's), beside vLLM's /metrics readings, KV events and proxied requests; "
        "open it with `enginetui replay FILE` or `enginetui export FILE`",
    )
    group.add_argument(
        "--tokenizer",
        metavar="DIR",
        help="decode cached blocks with this tokenizer (default: the served model's, when its "
        "path from /v1/models is on this machine)",
    )


def vllm_only_flags(args: argparse.Namespace) -> list[str]:
    """The --vllm companions given (they mean nothing on an `enginetui serve`)."""
    given = {
        "--kv-events": args.kv_events,
        "--kv-replay": args.kv_replay,
        "--tokenizer": args.tokenizer,
        "--max-num-seqs": args.max_num_seqs,
        "--max-num-batched-tokens": args.max_num_batched_tokens,
        "--proxy-port": args.proxy_port,
        "--record": args.record,
    }
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


def vllm_urls(url: str | None, vllm: list[str]) -> list[str]:
    """The servers to watch: attach's URL (with a bare --vllm) and every --vllm URL, in order."""
    return ([url] if url else []) + [u for u in vllm if u]


def run_vllm_watch(url: str | None, args: argparse.Namespace, api_key: str | None) -> int:
    """`enginetui attach --vllm URL`: the dashboard on that server, rebuilt from outside (or on the fleet) until q."""
    from enginetui.vllm_probe.with_vllm import VllmTUI
    from enginetui.vllm_watch.rebuild_engine import RebuildEngine
    from enginetui.vllm_watch.state import SchedulerLimits

    urls = vllm_urls(url, args.vllm)
    kv_events, kv_replay = args.kv_events or [], args.kv_replay or []
    problem = (
        ("give the server as attach --vllm URL" if not urls else None)
        or next((p for u in urls if (p := check_url(u))), None)
        or next((p for e in kv_events + kv_replay if (p := _check_endpoint(e))), None)
        or _check_counts(len(urls), kv_events, kv_replay)
        or _check_limits(args)
        or _check_port(args.proxy_port)
        or _check_record(args.record)
    )
    if problem:
        print(f"enginetui attach --vllm: {problem}", file=sys.stderr)
        return 2
    if len(urls) > 1:
        return _run_fleet(urls, args, api_key)
    url = urls[0]
    from enginetui.terminal_check import refuse_without_terminal

    if refuse_without_terminal("enginetui attach --vllm"):
        return 2
    engine = RebuildEngine(url)
    recording = None
    if args.record:
        from enginetui.flags import record as record_flag

        engine.tokenizer_dir = args.tokenizer
        recording = record_flag.start_or_say(engine, args.record, "enginetui attach --vllm")
        if recording is None:
            return 2
    app = VllmTUI(
        engine,
        url,
        kv_events=kv_endpoint(url, kv_events[0] if kv_events else None),
        kv_replay=kv_replay[0] if kv_replay else None,
        api_key=api_key,
        tokenizer=args.tokenizer,
        proxy=(args.proxy_host, args.proxy_port) if args.proxy_port is not None else None,
        limits=SchedulerLimits(args.max_num_seqs, args.max_num_batched_tokens),
        redraw_hz=args.redraw_hz,
        max_cpu_share=args.max_cpu / 100,
    )
    engine.facts_from = app.vllm  # the recording's header: what the server said by the first rebuilt step
    try:
        with sigterm_quits(app):
            app.run()
    finally:
        if recording is not None:
            record_flag.close_and_say(recording, "enginetui attach --vllm")
    return app.return_code or 0


def _run_fleet(urls: list[str], args: argparse.Namespace, api_key: str | None) -> int:
    from enginetui.terminal_check import refuse_without_terminal
    from enginetui.vllm_watch.fleet_app import FleetApp, Replica

    alone = [
        flag
        for flag, value in (
            ("--proxy-port", args.proxy_port),
            ("--record", args.record),
            ("--max-num-seqs", args.max_num_seqs),
            ("--max-num-batched-tokens", args.max_num_batched_tokens),
        )
        if value is not None
    ]
    if alone:
        print(f"enginetui attach --vllm: {', '.join(alone)} watch one server: not with a fleet", file=sys.stderr)
        return 2
    kv_events, kv_replay = args.kv_events or [], args.kv_replay or []
    replicas = [
        Replica(url, kv_endpoint(url, kv_events[i] if kv_events else None), kv_replay[i] if kv_replay else None)
        for i, url in enumerate(urls)
    ]
    if refuse_without_terminal("enginetui attach --vllm"):
        return 2
    app = FleetApp(replicas, api_key=api_key, tokenizer=args.tokenizer, redraw_hz=min(args.redraw_hz, 4.0))
    with sigterm_quits(app):
        app.run()
    return app.return_code or 0


def _check_counts(servers: int, kv_events: list[str], kv_replay: list[str]) -> str | None:
    """A fleet's endpoints: one per server, in order (or none: the defaults)."""
    for flag, given in (("--kv-events", kv_events), ("--kv-replay", kv_replay)):
        if len(given) > 1 and len(given) != servers or servers > 1 and len(given) == 1:
            return f"{flag} given {len(given)} times for {servers} servers: give it once per --vllm URL, in order"
    return None


def _check_endpoint(endpoint: str | None) -> str | None:
    if endpoint is None or endpoint.lower() == "none" or endpoint.startswith(("tcp://", "ipc://")):
        return None
    return f"{endpoint!r} is not a ZMQ endpoint: give it as tcp://HOST:PORT or ipc:///path"


def _check_limits(args: argparse.Namespace) -> str | None:
    for flag, value in (
        ("--max-num-seqs", args.max_num_seqs),
        ("--max-num-batched-tokens", args.max_num_batched_tokens),
    ):
        if value is not None and value < 1:
            return f"{flag} must be a positive integer, got {value}"
    return None


def _check_record(path: str | None) -> str | None:
    if path is None:
        return None
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK) or os.path.isdir(path):
        return (
            f"cannot write --record {path}: {folder} is not a folder this user can write into"
            if not os.path.isdir(path)
            else f"cannot write --record {path}: it is a folder"
        )
    return None


def _check_port(port: int | None) -> str | None:
    if port is not None and not 0 <= port <= 65535:
        return f"--proxy-port must be a port number (0-65535), got {port}"
    return None
