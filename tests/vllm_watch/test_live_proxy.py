"""The proxy, the rebuild on the one dashboard, honest latency and recording on a live vLLM (vLLM 0.32 CPU, the
embedded model; one server start). Runs only when vLLM's interpreter is configured:
ENGINETUI_VLLM_PYTHON=/path/to/vllm-venv/bin/python (skipped otherwise)."""

import asyncio
from functools import partial

import httpx
import pytest

from enginetui.core.models.default_model import DEFAULT_MODEL_DIR
from enginetui.core.record.reader import read_recording
from enginetui.openai_client import USAGE_EVERY_CHUNK
from enginetui.vllm_launch import find_vllm_python, start_vllm
from enginetui.vllm_watch import prometheus as m
from enginetui.vllm_watch import vllm_record
from enginetui.vllm_watch.state import SchedulerLimits, WatchState
from tests.support.pilot import until as wait_until
from tests.vllm_watch.watch_pilot import rebuilt

PYTHON = find_vllm_python()
pytestmark = [
    pytest.mark.skipif(PYTHON is None, reason="set ENGINETUI_VLLM_PYTHON to vLLM's interpreter"),
    pytest.mark.timeout(1800),
    pytest.mark.slow,
]
SIZE = (160, 48)
WAIT_S = 180.0  # for anything the live server does
until = partial(wait_until, timeout=WAIT_S)  # the Pilot wait, with this file's deadline
BURST = 12  # concurrent streamed requests through the proxy (more than max_num_seqs: some wait)


def rebuild_seen(app) -> str:
    """Where the rebuild got to, for a wait that timed out."""
    rb = app.vllm.rebuild
    if rb is None:
        return "no rebuild"
    return (
        f"{len(rb.views)} requests outside the rebuild, {len(rb.entered)} entered, {rb.num_skipped} left out, "
        f"{len(rb.steps)} timed steps; the dashboard has {len(app.state.requests)} requests, step "
        f"{app.state.step}"
    )


async def test_the_proxy_passes_and_lists_a_live_vllms_requests(tmp_path):
    server = start_vllm(PYTHON, str(DEFAULT_MODEL_DIR), extra_args=("--max-num-seqs", "4"))
    record = tmp_path / "live.etrec"
    try:
        app = rebuilt(
            server.url,
            str(record),
            kv_events=server.kv_endpoint,
            kv_replay=server.replay_endpoint,
            poll_s=0.5,
            proxy=("127.0.0.1", 0),
            limits=SchedulerLimits(4, None),
        )
        async with app.run_test(size=SIZE) as pilot:
            await until(
                pilot,
                lambda: (
                    app.vllm.server and app.vllm.proxy_url and app.vllm.caches.decode and app.vllm.rebuild is not None
                ),
                "the model, its tokenizer, the proxy and the rebuild (its token budget read from /server_info)",
            )
            model = app.vllm.server.model
            body = {
                "model": model,
                "prompt": "Return the number of items",
                "max_tokens": 16,
                "temperature": 0,
                "ignore_eos": True,
            }
            async with httpx.AsyncClient(timeout=120) as http:
                direct = (await http.post(f"{server.url}/v1/completions", json=body)).json()
                via = (await http.post(f"{app.vllm.proxy_url}/v1/completions", json=body)).json()
                assert via["choices"][0]["text"] == direct["choices"][0]["text"]  # greedy: the same text
                chat = await http.post(
                    f"{app.vllm.proxy_url}/v1/chat/completions",
                    json={"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
                )
                assert chat.status_code in (200, 400)  # passed through whatever vLLM answers (no chat template: 400)

                async def stream(i: int) -> str:
                    text = ""
                    async with http.stream(
                        "POST",
                        f"{app.vllm.proxy_url}/v1/completions",
                        json={**body, "prompt": f"{i} The function", "max_tokens": 48, "stream": True},
                    ) as r:
                        async for line in r.aiter_lines():
                            text += line
                    return text

                await asyncio.gather(*(stream(i) for i in range(BURST)))
            await until(
                pilot,
                lambda: sum(not v.active for v in app.vllm.requests.values()) == BURST + 2,
                "every proxied request ended",
            )
            views = list(app.vllm.requests.values())
            assert views[0].text == direct["choices"][0]["text"] and views[0].tokens() == 16
            streamed = [v for v in views if v.stream]
            print(
                "streamed:",
                [(v.status, v.finish_reason, v.tokens(), v.output_tokens, v.token_chunks) for v in streamed],
            )
            assert len(streamed) == BURST and all(
                v.status == "finished" and v.finish_reason == "length" for v in streamed
            )
            assert all(v.tokens() is None and 1 <= v.token_chunks <= 48 for v in streamed)  # no usage asked for
            # vLLM merges a stream's tokens into fewer chunks when it runs ahead of its client (seen: all 48
            # in one under CI's load): an ITL needs two chunks, and most streams have them
            assert all(v.ttft() is not None and (v.itl() is None) == (v.token_chunks < 2) for v in streamed)
            assert sum(v.itl() is not None for v in streamed) >= BURST // 2
            await until(pilot, lambda: (app.vllm.latest.total(m.REQUESTS_DONE) or 0) >= BURST + 1, "/metrics caught up")
            reasons = app.vllm.waiting_by_reason()
            assert set(reasons) >= {"capacity", "deferred"}
            steps = app.vllm.steps()
            assert steps is not None and steps.mean_tokens > 0
            ttft = app.vllm.latency(m.TTFT, "TTFT")
            mean = ttft.window_mean
            assert ttft.window_count >= BURST and mean is not None
            low, high = ttft.window[-1] or (0, 0)  # the p99 bucket: no TTFT above its upper bound... nor the mean
            assert mean <= high
            assert max(v.ttft() for v in streamed) > 0
            # the rebuild (vLLM's max_num_seqs given, its token budget read from /server_info in dev mode)
            # steps a proxied request into the dashboard's engine panels. Not the burst's: without usage
            # their prompt lengths are unknown, so streams that ended before the next /metrics reading
            # are left out. A stream with usage on each chunk is sized whenever the readings come.
            async with httpx.AsyncClient(timeout=120) as http:
                sized = {**body, "stream": True, "stream_options": USAGE_EVERY_CHUNK}
                async with http.stream("POST", f"{app.vllm.proxy_url}/v1/completions", json=sized) as r:
                    await r.aread()
            view = list(app.vllm.requests.values())[-1]
            assert view.stream and view.prompt_tokens and view.tokens() == 16
            await until(
                pilot,
                lambda: (
                    (rebuilt := app.state.requests.get(view.req_id)) is not None and rebuilt.num_output_tokens == 16
                ),
                "the rebuild's steps of the stream with usage",
                seen=lambda: rebuild_seen(app),
            )
            views = list(app.vllm.requests.values())
            assert set(app.state.requests) <= {v.req_id for v in views}
            assert app.state.requests[view.req_id].num_prompt_tokens == view.prompt_tokens
            app.redraw()
            assert "INFERRED" in str(app.query_one("#vllm-oracle").render())
        app.vllm_engine.recording.close()
        live_tree = {k for k, b in app.vllm.caches.ranks[0].blocks.items() if b.cached}  # as the app closed
        recording = read_recording(record)
        state = WatchState.from_recorded([vllm_record.decode(p) for _, p in recording.vllm_items()])
        assert {k for k, b in state.caches.ranks[0].blocks.items() if b.cached} == live_tree
        assert [v.text for v in state.requests.values()] == [v.text for v in views]
    finally:
        server.stop()
