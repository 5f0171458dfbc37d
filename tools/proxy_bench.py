"""What the watcher's proxy costs: the same streaming requests sent to a server direct and through
a proxy in front of it, by `--clients` concurrent clients, on 127.0.0.1 only.

    python tools/proxy_bench.py                      # a synthetic vLLM-shaped server
    python tools/proxy_bench.py --upstream http://127.0.0.1:8000 --model opt-tiny

Reports the p50 of the time to the first streamed chunk and of the whole response, direct and
proxied (the difference is what the proxy adds), and the throughput (streamed chunks per second).
The proxy runs in a process of its own with the watcher's state folding every request
(`WatchState`, as in the dashboard, without the screen). Without `--upstream` the server is a
synthetic one (`--tokens` chunks shaped as vLLM's, `--token-delay-ms` apart): what is measured is
then the proxy alone. Bounded: `--clients` × `--requests` requests per round, `--rounds` rounds of
each (direct and proxied alternate). A figure needs a quiet machine.
"""

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

import httpx

from enginetui.vllm_launch import free_port

HOST = "127.0.0.1"  # the only address it uses


@dataclass(frozen=True, slots=True)
class Round:
    """One round of requests against one address."""

    first_chunk_s: list[float]  # each request's time to its first streamed chunk
    total_s: list[float]  # each request's time to the end of its response
    chunks: int  # streamed chunks received, all requests
    wall_s: float  # the round's wall time


async def run_round(url: str, model: str, clients: int, requests: int, tokens: int) -> Round:
    """`clients` clients at once, each sending `requests` streaming completions one after another."""
    body = {"model": model, "prompt": "The function", "max_tokens": tokens, "stream": True, "ignore_eos": True}
    first: list[float] = []
    total: list[float] = []
    chunks = 0
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(120.0), limits=limits) as http:

        async def client() -> None:
            nonlocal chunks
            for _ in range(requests):
                start = time.perf_counter()
                seen = None
                async with http.stream("POST", "/v1/completions", json=body) as r:
                    r.raise_for_status()
                    async for line in r.aiter_lines():
                        if line.startswith("data: {"):
                            chunks += 1
                            seen = seen or time.perf_counter()
                end = time.perf_counter()
                first.append((seen or end) - start)
                total.append(end - start)

        start = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        wall = time.perf_counter() - start
    return Round(first, total, chunks, wall)


def summary(rounds: list[Round]) -> dict:
    first = [x for r in rounds for x in r.first_chunk_s]
    total = [x for r in rounds for x in r.total_s]
    return {
        "requests": len(total),
        "p50_first_chunk_ms": 1000 * statistics.median(first),
        "p50_total_ms": 1000 * statistics.median(total),
        "chunks_per_s": sum(r.chunks for r in rounds) / sum(r.wall_s for r in rounds),
    }


# ---- the servers, each in a process of its own ---------------------------------------------


def synthetic_upstream(tokens_default: int, delay_s: float):
    """A raw ASGI app answering /v1/completions with vLLM-shaped chunks (`max_tokens` of them), and
    /v1/models."""

    async def app(scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if scope["path"] == "/v1/models":
            data = json.dumps({"data": [{"id": "synthetic", "root": "synthetic"}]}).encode()
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
            )
            await send({"type": "http.response.body", "body": data})
            return
        count = json.loads(body or b"{}").get("max_tokens") or tokens_default
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        for i in range(count):
            await asyncio.sleep(delay_s)
            chunk = {
                "id": "cmpl-bench",
                "object": "text_completion",
                "model": "synthetic",
                "choices": [{"index": 0, "text": " tok", "finish_reason": "length" if i == count - 1 else None}],
                "usage": {"prompt_tokens": 2, "completion_tokens": i + 1, "total_tokens": i + 3},
            }
            await send(
                {"type": "http.response.body", "body": f"data: {json.dumps(chunk)}\n\n".encode(), "more_body": True}
            )
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})

    return app


def serve_forever(app, port: int) -> None:
    import uvicorn

    uvicorn.run(app, host=HOST, port=port, log_level="warning", access_log=False, lifespan="off", backlog=2048)


def serve_proxy(upstream: str, port: int) -> None:
    """The watcher's proxy and its state, without the screen."""
    from enginetui.vllm_watch.proxy import VllmProxy, listen, serve
    from enginetui.vllm_watch.state import WatchState

    state = WatchState(upstream, None)
    asyncio.run(serve(VllmProxy(upstream, state), listen(HOST, port)))


def start(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, *args], env={**os.environ}, stdout=subprocess.DEVNULL)


def wait_until_up(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            httpx.get(f"{url}/v1/models", timeout=2.0)
            return
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing answers at {url}") from None
            time.sleep(0.1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", help="a running server (default: start a synthetic one)")
    parser.add_argument("--model", default="synthetic", help="the model name sent (a real server's served name)")
    parser.add_argument("--clients", type=int, default=64, help="concurrent streaming clients (default 64)")
    parser.add_argument("--requests", type=int, default=4, help="requests per client per round (default 4)")
    parser.add_argument("--tokens", type=int, default=64, help="max_tokens of each request (default 64)")
    parser.add_argument("--token-delay-ms", type=float, default=5.0, help="the synthetic server's delay per chunk")
    parser.add_argument(
        "--rounds", type=int, default=2, help="rounds of each, direct and proxied alternating (default 2)"
    )
    parser.add_argument("--serve-upstream", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--serve-proxy", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_upstream is not None:
        serve_forever(synthetic_upstream(args.tokens, args.token_delay_ms / 1000), args.serve_upstream)
        return 0
    if args.serve_proxy is not None:
        serve_proxy(args.upstream, args.serve_proxy)
        return 0
    if args.clients < 1 or args.requests < 1 or args.rounds < 1 or args.tokens < 1:
        parser.error("--clients, --requests, --rounds and --tokens must be positive")
    started = []
    try:
        upstream = args.upstream
        if upstream is None:
            port = free_port()
            started.append(
                start(
                    "--serve-upstream",
                    str(port),
                    "--tokens",
                    str(args.tokens),
                    "--token-delay-ms",
                    str(args.token_delay_ms),
                )
            )
            upstream = f"http://{HOST}:{port}"
        proxy_port = free_port()
        started.append(start("--serve-proxy", str(proxy_port), "--upstream", upstream))
        proxy = f"http://{HOST}:{proxy_port}"
        wait_until_up(upstream)
        wait_until_up(proxy)
        results: dict[str, list[Round]] = {"direct": [], "proxied": []}
        for _ in range(args.rounds):
            for name, url in (("direct", upstream), ("proxied", proxy)):
                results[name].append(asyncio.run(run_round(url, args.model, args.clients, args.requests, args.tokens)))
        direct, proxied = summary(results["direct"]), summary(results["proxied"])
        report = {
            "clients": args.clients,
            "direct": direct,
            "proxied": proxied,
            "added_p50_first_chunk_ms": proxied["p50_first_chunk_ms"] - direct["p50_first_chunk_ms"],
            "added_p50_total_ms": proxied["p50_total_ms"] - direct["p50_total_ms"],
            "throughput_ratio": proxied["chunks_per_s"] / direct["chunks_per_s"],
        }
        print(json.dumps(report, indent=2))
        return 0
    finally:
        for process in started:
            process.terminate()
            process.wait(10)


if __name__ == "__main__":
    sys.exit(main())
