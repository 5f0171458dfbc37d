"""docs/vllm.md's picture of the dashboard on a live vLLM: `python tools/vllm_screenshot.py [OUT.svg]`.

Starts vLLM (enginetui/vllm_launch.py; ENGINETUI_VLLM_PYTHON names its interpreter) on the
embedded model, attaches the dashboard (through Pilot, at 160x48), types two prompts that share a
prefix, then sends long requests that overfill the 64-block pool, and takes the picture while they
run (once blocks are evicted): the prefix tree branching and evicting, queues, rates and latencies
from /metrics. vLLM is stopped afterwards. Run it under `flock /work/bench.lock` on a shared machine.
"""

import asyncio
import sys
from dataclasses import replace
from pathlib import Path

from textual.widgets import Input

from enginetui.core.models.default_model import DEFAULT_MODEL_DIR
from enginetui.dashboard.widgets.prompt_bar import PromptBar
from enginetui.vllm_launch import find_vllm_python, start_vllm
from enginetui.vllm_watch import prometheus as m
from enginetui.vllm_watch.app import VllmWatchApp
from enginetui.vllm_watch.prompts import BRANCHES, BURST, SHARED

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


async def play(app: VllmWatchApp) -> str:
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.state.server is not None and app.state.caches.decode is not None)
        bar = app.query_one(PromptBar)
        bar.settings = replace(bar.settings, max_tokens=48, temperature=0.0, ignore_eos=True)  # 3 blocks each
        for branch in BRANCHES:
            app.query_one("#prompt", Input).value = SHARED + branch
            await pilot.press("enter")
            await until(pilot, lambda: not any(v.active for v in app.state.requests.values()))
        long = replace(bar.settings, max_tokens=300, ignore_eos=True)
        for prompt in BURST + BURST:  # twice the pool's room: requests wait, blocks are evicted
            app.submit(prompt, long)

        def active() -> int:  # requests still streaming
            return sum(v.active for v in app.state.requests.values())

        await until(pilot, lambda: app.state.caches.ranks[0].num_removed > 0 and active() > len(BURST) or not active())
        cache, latest = app.state.caches.ranks[0], app.state.latest
        waiting = (latest.total(m.WAITING) if latest is not None else None) or 0
        print(
            f"the picture: {active()} requests streaming, {cache.num_cached} blocks cached, "
            f"{cache.num_removed} evicted, {waiting:.0f} waiting",
            file=sys.stderr,
        )
        app.redraw()
        await pilot.pause()
        return app.export_screenshot(title="enginetui attach --vllm")


def main(out: str = "screenshots/vllm-watch.svg") -> int:
    python = find_vllm_python()
    if python is None:
        print("set ENGINETUI_VLLM_PYTHON to vLLM's interpreter", file=sys.stderr)
        return 2
    with start_vllm(python, str(MODEL), extra_args=("--served-model-name", "opt-tiny")) as server:
        app = VllmWatchApp(server.url, kv_events=server.kv_endpoint, kv_replay=server.replay_endpoint, poll_s=0.25)
        svg = asyncio.run(play(app))
    Path(out).write_text(svg, encoding="utf-8")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
