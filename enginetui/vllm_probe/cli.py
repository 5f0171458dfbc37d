"""`enginetui attach --probe ADDR [--vllm URL] [--record FILE]`: its flags checked, then the dashboard on the probe."""

import argparse
import asyncio
import sys

from enginetui.interrupt import sigterm_quits
from enginetui.vllm_probe.attach import ProbeEngine, ProbeWatchTUI


def run_probe(args: argparse.Namespace, api_key: str | None) -> int:
    """`enginetui attach --probe ADDR [--vllm URL] [--record FILE]`: check the flags, then the dashboard until q."""
    from enginetui.vllm_probe.config import ProbeConfigError, check_endpoint
    from enginetui.vllm_watch.cli import check_url, vllm_urls

    urls = vllm_urls(args.url, args.vllm or [])
    try:
        check_endpoint(args.probe, "--probe")
        for flag, endpoints in (("--kv-events", args.kv_events), ("--kv-replay", args.kv_replay)):
            for endpoint in endpoints or []:
                if endpoint.lower() != "none":
                    check_endpoint(endpoint, flag)
    except ProbeConfigError as exc:
        return _refuse(str(exc))
    limits = [
        f
        for f, v in (("--max-num-seqs", args.max_num_seqs), ("--max-num-batched-tokens", args.max_num_batched_tokens))
        if v is not None
    ]
    vllm_flags = [
        flag
        for flag, value in (
            ("--kv-events", args.kv_events),
            ("--kv-replay", args.kv_replay),
            ("--tokenizer", args.tokenizer),
            ("--proxy-port", args.proxy_port),
        )
        if value is not None
    ]
    problem = (
        ("a server URL beside --probe: give vLLM's as --vllm URL" if args.url and not args.vllm else None)
        or (f"--probe watches one vLLM: {len(urls)} --vllm URLs given" if len(urls) > 1 else None)
        or (f"{', '.join(limits)}: the probe publishes vLLM's limits; leave them out" if limits else None)
        or (f"{', '.join(vllm_flags)}: only with --vllm URL" if vllm_flags and not urls else None)
        or next((p for u in urls if (p := check_url(u))), None)
        or (
            "--kv-events and --kv-replay are given once beside --probe"
            if len(args.kv_events or []) > 1 or len(args.kv_replay or []) > 1
            else None
        )
        or (
            f"--proxy-port must be a port number (0-65535), got {args.proxy_port}"
            if args.proxy_port is not None and not 0 <= args.proxy_port <= 65535
            else None
        )
    )
    if problem:
        return _refuse(problem)
    from enginetui.terminal_check import refuse_without_terminal

    if refuse_without_terminal("enginetui attach"):
        return 2
    engine = ProbeEngine(args.probe)
    if args.record and urls:
        from enginetui.vllm_probe.recording import read_facts
        from enginetui.vllm_watch.server import ServerError

        try:
            engine.facts = asyncio.run(read_facts(urls[0], api_key))
        except ServerError as exc:
            return _refuse(f"--record names vLLM's model from {urls[0]}, which did not answer: {exc}")
        engine.tokenizer_dir = args.tokenizer
    recording = None
    if args.record:
        from enginetui.flags import record as record_flag

        recording = record_flag.start_or_say(engine, args.record, "enginetui attach")
        if recording is None:
            return 2
    app: ProbeWatchTUI
    if urls:
        from enginetui.vllm_probe.with_vllm import VllmTUI
        from enginetui.vllm_watch.cli import kv_endpoint

        app = VllmTUI(
            engine,
            urls[0],
            kv_events=kv_endpoint(urls[0], args.kv_events[0] if args.kv_events else None),
            kv_replay=args.kv_replay[0] if args.kv_replay else None,
            api_key=api_key,
            tokenizer=args.tokenizer,
            proxy=(args.proxy_host, args.proxy_port) if args.proxy_port is not None else None,
            redraw_hz=args.redraw_hz,
            max_cpu_share=args.max_cpu / 100,
        )
    else:
        app = ProbeWatchTUI(engine, redraw_hz=args.redraw_hz, max_cpu_share=args.max_cpu / 100)
    try:
        with sigterm_quits(app):
            app.run()
    finally:
        engine.shutdown()
        if recording is not None:
            record_flag.close_and_say(recording, "enginetui attach")
    return app.return_code or 0


def _refuse(problem: str) -> int:
    print(f"enginetui attach: {problem}", file=sys.stderr)
    return 2
