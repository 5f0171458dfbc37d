"""docs/vllm.md's picture of the dashboard on a live vLLM: `python tools/vllm_screenshot.py [OUT.svg]`.

Starts vLLM (enginetui/vllm_launch.py; ENGINETUI_VLLM_PYTHON names its interpreter) on the
embedded model, attaches the one dashboard without a probe (`attach --vllm URL --proxy-port 0`, through
Pilot, at 160x48), sends two prompts that share a prefix through the proxy, then long requests that
overfill the 64-block pool, and takes the picture while they run (once blocks are evicted): the engine's
panels on the rebuild's steps (inferred), the prefix tree branching and evicting, rates and latencies
from /metrics. Every request goes through the proxy, so the rebuild sees all of vLLM's work. vLLM is
stopped afterwards. Run it under `flock /work/bench.lock` on a shared machine.
"""

import asyncio
import sys
from pathlib import Path

import httpx

from enginetui.core.models.default_model import DEFAULT_MODEL_DIR
from enginetui.vllm_launch import find_vllm_python, start_vllm
from enginetui.vllm_probe.with_vllm import VllmTUI
from enginetui.vllm_watch import prometheus as m
from enginetui.vllm_watch.prompts import BRANCHES, BURST, SHARED
from enginetui.vllm_watch.rebuild_engine import RebuildEngine

SIZE = (160, 48)  # terminal columns, rows (the engine dashboard's large layout)
MODEL = DEFAULT_MODEL_DIR
WAIT_S = 120.0


async def until(pilot, done, timeout: float = WAIT_S) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not done():
        if loop.time() > deadline:
            raise TimeoutError("vLLM did not get there in time")
        await pilot.pause(0.05)


async def play(app: VllmTUI) -> str:
    async with app.run_test(size=SIZE) as pilot:
        state = app.vllm
        await until(pilot, lambda: state.server and state.caches.decode and state.proxy_url and state.rebuild)
        url = f"{state.proxy_url}/v1/completions"
        # streamed with vLLM's usage on every chunk: the rebuild needs each prompt's length as it starts
        usage = {"include_usage": True, "continuous_usage_stats": True}
        body = {"model": state.server.model, "temperature": 0.0, "ignore_eos": True, "stream": True}
        async with httpx.AsyncClient(timeout=WAIT_S) as http:

            async def stream(prompt: str, max_tokens: int) -> None:
                request = {**body, "prompt": prompt, "max_tokens": max_tokens, "stream_options": usage}
                async with http.stream("POST", url, json=request) as r:
                    async for _ in r.aiter_bytes():
                        pass

            for branch in BRANCHES:  # 3 blocks each, one after the other: the tree branches
                await stream(SHARED + branch, 48)
            tasks = [asyncio.ensure_future(stream(p, 300)) for p in BURST + BURST]  # twice the pool's room

            def active() -> int:  # requests still streaming
                return sum(v.active for v in state.requests.values())

            def busy() -> bool:  # blocks evicted, and the rebuild's engine panels running several requests
                rebuilt = app.state.latest
                return state.caches.ranks[0].num_removed > 0 and rebuilt is not None and len(rebuilt.running) > 2

            await until(pilot, lambda: len(state.requests) == len(BRANCHES) + 2 * len(BURST))  # all in
            await until(pilot, lambda: busy() or not active())
            cache, latest = state.caches.ranks[0], state.latest
            waiting = (latest.total(m.WAITING) if latest is not None else None) or 0
            print(
                f"the picture: {active()} requests streaming, {cache.num_cached} blocks cached, "
                f"{cache.num_removed} evicted, {waiting:.0f} waiting; rebuilt running "
                f"{len(app.state.latest.running)}, vLLM {latest.total(m.RUNNING) if latest else 0:.0f}",
                file=sys.stderr,
            )
            app.redraw()
            await pilot.pause()
            svg = app.export_screenshot(title="enginetui attach --vllm")
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return svg


def main(out: str = "screenshots/vllm-watch.svg") -> int:
    python = find_vllm_python()
    if python is None:
        print("set ENGINETUI_VLLM_PYTHON to vLLM's interpreter", file=sys.stderr)
        return 2
    with start_vllm(python, str(MODEL), extra_args=("--served-model-name", "opt-tiny")) as server:
        app = VllmTUI(
            RebuildEngine(server.url),
            server.url,
            kv_events=server.kv_endpoint,
            kv_replay=server.replay_endpoint,
            poll_s=0.25,
            proxy=("127.0.0.1", 0),
        )
        svg = asyncio.run(play(app))
    Path(out).write_text(svg, encoding="utf-8")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
