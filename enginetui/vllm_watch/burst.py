"""A burst of streamed requests through the watcher's proxy, with no dashboard: the watcher's state
(recorded when a file is given, as `attach --vllm URL --record` records: the rebuild's step events and
what vLLM added) reads vLLM's /metrics while every request goes through the proxy.
`python tools/capture.py --burst` records a fixture with it, which tests/vllm_watch/test_sched_rebuild.py
replays (replay_burst) and compares with vLLM's own steps (vllm_logged_steps, matching_steps).

Each request streams with vLLM's usage on every chunk (`continuous_usage_stats`), so the state
knows each request's prompt length and when each of its tokens went by.
"""

import asyncio
import json
import lzma
import tempfile
import time
from pathlib import Path

import httpx

from enginetui.bench.vllm_step_log import LoggedStep, logged_steps
from enginetui.core.record.reader import read_recording
from enginetui.simulate.event_sinks import EventSink
from enginetui.vllm_watch import proxy as proxy_server
from enginetui.vllm_watch import vllm_record
from enginetui.vllm_watch.feed import ServerFeed
from enginetui.vllm_watch.prompts import TOPICS
from enginetui.vllm_watch.rebuild_engine import RebuildEngine
from enginetui.vllm_watch.sched_rebuild import SchedRebuild
from enginetui.vllm_watch.server import VllmClient
from enginetui.vllm_watch.state import SchedulerLimits, WatchState

BURST_TOPICS = 8  # a burst's prompts cycle through the first TOPICS (the captured bursts' did)
SETTLE_READINGS = 3  # /metrics readings after the last request ended (vLLM's gauges back at rest)
READING_TIMEOUT_S = 60.0  # most to wait for those
BURST_REQUESTS = 64  # the captured burst: requests sent at once
BURST_MAX_TOKENS = 96  # each one's length (ignore_eos)
BURST_BLOCKS = 32  # the KV pool (32-token blocks): 16 requests of ~120 tokens need more, so vLLM preempts
BURST_LIMITS = SchedulerLimits(max_num_seqs=16, max_num_batched_tokens=512)  # vLLM's scheduler flags
BURST_POLL_S = 0.1  # /metrics reading interval: ~35 readings in a burst of ~4 s (at 0.2 s: 15).
# Not much shorter: the proxy and the poller share the watcher's event loop, and vLLM's API server renders
# /metrics on the loop that streams the tokens; at 0.02 s a reading took ~0.5 s under the burst and slowed
# the burst itself (6 readings in 7 s)
STEP_LOG = "vllm_steps.log.xz"  # in a burst capture: vLLM's line per engine step


def burst_prompt(i: int) -> str:
    """The i-th burst request's prompt: 20 to 40 tokens of the embedded model's tokenizer."""
    return f"{i} {TOPICS[i % BURST_TOPICS]} a thing that " + "returns the items in order, " * (1 + i % 4)


async def proxied_burst(
    url: str,
    limits: SchedulerLimits,
    *,
    num_requests: int = 64,
    max_tokens: int = 64,
    record: str | None = None,
    poll_s: float = 0.25,
    first: int = 0,
    kv_endpoint: str | None = None,
) -> WatchState:
    """Send `num_requests` streamed completions at once through a proxy in front of `url`; return the
    watcher's state once all ended and vLLM's gauges were read a few times more. Their prompts are
    burst_prompt(first), burst_prompt(first + 1), … With `kv_endpoint` the watcher also listens to
    vLLM's KV events there (the recording keeps each batch)."""
    client = VllmClient(url, None)
    engine = RebuildEngine(url)
    recording = engine.start_recording(record, "enginetui.vllm_watch.burst") if record else None
    state = WatchState(url, None, limits=limits, rebuild_sinks=[engine] if record else [])
    if recording is not None:
        state.start_recording(lambda item: recording.write_vllm(vllm_record.encode(item)))
        engine.facts_from = state
    tasks: list[asyncio.Task] = []
    feed = ServerFeed(
        state, client, lambda coro: tasks.append(asyncio.create_task(coro)), kv_events=kv_endpoint, poll_s=poll_s
    )
    sock = proxy_server.listen("127.0.0.1", 0)
    proxy_url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    state.proxy_listening(time.time(), proxy_url)
    tasks.append(asyncio.create_task(proxy_server.serve(proxy_server.VllmProxy(url, state, feed.wake), sock)))
    tasks.append(asyncio.create_task(feed.poll_metrics()))
    try:
        async with httpx.AsyncClient(timeout=600) as http:
            model = (await http.get(f"{url}/v1/models")).json()["data"][0]["id"]
            while state.latest is None:  # a reading before the burst
                await asyncio.sleep(0.05)

            async def one(i: int) -> None:
                body = {
                    "model": model,
                    "prompt": burst_prompt(i),
                    "max_tokens": max_tokens,
                    "temperature": 0,
                    "ignore_eos": True,
                    "stream": True,
                    "stream_options": {"include_usage": True, "continuous_usage_stats": True},
                }
                async with http.stream("POST", f"{proxy_url}/v1/completions", json=body) as r:
                    r.raise_for_status()
                    async for _ in r.aiter_bytes():
                        pass

            await asyncio.gather(*(one(i) for i in range(first, first + num_requests)))
        deadline = time.monotonic() + READING_TIMEOUT_S
        while any(v.active for v in state.requests.values()) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        settled = time.time() + SETTLE_READINGS * poll_s
        while state.latest.time < settled and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await client.close()
        if recording is not None:
            recording.close()
    return state


def replay_burst(folder: Path, sinks: list[EventSink] | None = None) -> WatchState:
    """The watcher's state after replaying a burst capture's /metrics readings and proxied requests, given
    the limits vLLM was started with: the rebuild runs again on them (its events go to `sinks`)."""
    limits, items = burst_items(folder)
    return WatchState.from_recorded(items, limits=limits, rebuild_sinks=sinks or [])


def burst_items(folder: Path) -> tuple[SchedulerLimits, list[vllm_record.VllmItem]]:
    """A burst capture's vLLM limits and what vLLM added to its recording, in order."""
    session = json.loads((folder / "session.json").read_text())
    with lzma.open(folder / "burst.etrec.xz") as f, tempfile.NamedTemporaryFile(suffix=".etrec") as tmp:
        tmp.write(f.read())
        tmp.flush()
        recording = read_recording(tmp.name)
        items = [vllm_record.decode(payload) for _, payload in recording.vllm_items()]
    return SchedulerLimits(**session["limits"]), items


def vllm_logged_steps(folder: Path) -> list[LoggedStep] | None:
    """vLLM's own steps in a burst capture (None: captured before they were kept)."""
    path = folder / STEP_LOG
    if not path.exists():
        return None
    with lzma.open(path, "rt") as f:
        return list(logged_steps(f.read()))


def matching_steps(rebuild: SchedRebuild, logged: list[LoggedStep]) -> int:
    """How many of vLLM's steps the rebuild made alike, in order: the same requests and tokens scheduled,
    the same KV blocks held after."""
    size = rebuild.setup.num_blocks
    return sum(
        ours.scheduled_requests == theirs.requests
        and ours.scheduled_tokens == theirs.tokens
        and (theirs.kv_usage is None or round(theirs.kv_usage * size) == ours.used_blocks)
        for ours, theirs in zip(rebuild.steps, logged)
    )
