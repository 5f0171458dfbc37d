"""Regenerate the dashboard screenshots in screenshots/: `python tools/screenshots.py [OUT_DIR] [NAME ...]`.

Each scene starts the REAL engine (the embedded default model, a 48-block KV pool) and drives the app
through App.run_test until the state it pictures is on screen: two prompts streaming, a burst preempting
(also in an 80x24 terminal), a paused engine with one request's block table, the help screen, the engine
killed under two streaming prompts, the timeline of a burst with a preemption, and (serve-attach, for
docs/serve.md) the dashboard attached to `enginetui serve` while completions and chats stream over HTTP.
The engine runs in real time, so two runs never draw quite the same picture; the SVG snapshot tests
(tests/dashboard/test_snapshots.py) replay deterministic versions of these scenes with a scripted runner.
"""

import asyncio
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from textual.pilot import Pilot
from textual.widgets import Input

from enginetui.dashboard.app import EngineTUI
from enginetui.dashboard.engine_link import open_engine
from enginetui.dashboard.logs import default_log_file, route_python_output
from enginetui.dashboard.timeline import RECOMPUTE
from enginetui.dashboard.widgets.process_panel import ProcessPanel
from enginetui.dashboard.widgets.prompt_bar import PromptBar
from enginetui.serve.process import ServeProcess
from enginetui.serve.remote_engine import RemoteEngine
from enginetui.settings import SamplingSettings

SIZE = (120, 36)  # terminal columns, rows
ENGINE_ARGS: dict[str, Any] = {"model": None, "num_gpu_blocks_override": 48, "seed": 0}  # embedded model, small pool
# Sampled from the engine's seeded generator, past EOS: the pictured requests stream instead of ending early.
SETTINGS = SamplingSettings(max_tokens=96, temperature=0.8, ignore_eos=True)
WAIT_S = 60.0  # longest a scene waits for the engine to get somewhere
STEPS_WHILE_PAUSED = 24  # single steps taken in the paused scene
# The embedded model learned Python's documentation: prompts in that voice keep it talking longest.
PROMPTS = (
    "Return the number of",
    "This function reads a file and",
    "Raises ValueError if the",
)


@dataclass(frozen=True, slots=True)
class Scene:
    """One screenshot: what to do with the app (on a freshly started engine) before the picture."""

    name: str  # file name (without .svg)
    play: Callable[[Pilot], Awaitable[str]]  # drives the app into the state to picture; returns the SVG
    size: tuple[int, int] = SIZE  # terminal columns, rows
    served: bool = False  # True: the dashboard attached to `enginetui serve` under HTTP traffic (not in process)


def app_of(pilot: Pilot) -> EngineTUI:
    app = pilot.app
    assert isinstance(app, EngineTUI)
    return app


async def wait_for(pilot: Pilot, done: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    """Let the app and the engine run until `done()`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not done():
        if loop.time() > deadline:
            seen = ", ".join(f"{v.req_id} {v.status} {v.num_output_tokens} tok" for v in app_of(pilot).state.ordered())
            raise TimeoutError(f"the engine did not get to {what} within {timeout:.0f} s (requests: {seen or 'none'})")
        await pilot.pause(0.05)


async def ready(pilot: Pilot) -> EngineTUI:
    """Wait for the engine to connect and the process panel's first reading; use SETTINGS."""
    app = app_of(pilot)
    await wait_for(pilot, lambda: app.phase == "ready", "ready")
    await wait_for(pilot, lambda: app.query_one(ProcessPanel).has_sample, "a process reading")
    app.query_one(PromptBar).settings = SETTINGS
    return app


async def frame(pilot: Pilot, name: str) -> str:
    """The screen as SVG, without the start-up notification."""
    app = app_of(pilot)
    app.clear_notifications()
    app.redraw()
    await pilot.pause()
    return app.export_screenshot(title=f"enginetui · {name}")


def streaming_requests(app: EngineTUI, tokens: int) -> list[str]:
    """Running requests that have generated at least `tokens` tokens."""
    return [v.req_id for v in app.state.ordered() if v.status == "running" and v.num_output_tokens >= tokens]


async def frame_when(
    pilot: Pilot,
    name: str,
    pick: Callable[[], str | None],
    shows: Callable[[str], bool],
    refill: Callable[[], None] = lambda: None,
) -> str:
    """The first frame taken once `pick()` names a request to select and whose SVG `shows()` the
    state wanted. The real engine does not wait for the camera, so take frames until one does;
    `refill()` runs whenever no request is live (the model ended them all)."""
    app = app_of(pilot)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while loop.time() < deadline:
        await pilot.pause(0.02)
        if not any(v.active for v in app.state.ordered()):
            refill()
        req_id = pick()
        if req_id is None:
            continue
        app.selected = req_id
        svg = await frame(pilot, name)
        if shows(svg):
            return svg
    raise TimeoutError(f"the {name} picture did not come within {WAIT_S:.0f} s")


async def select(pilot: Pilot, req_id: str) -> None:
    """Move the selection to `req_id` with the arrow keys."""
    app = app_of(pilot)
    while app.selected != req_id:
        ids = list(app.state.requests)
        here = ids.index(app.selected) if app.selected in ids else -1
        await pilot.press("down" if ids.index(req_id) > here else "up")


async def streaming(pilot: Pilot) -> str:
    """Prompts streaming (the first typed), the next one being typed; a streaming one selected."""
    app = await ready(pilot)
    await pilot.press(*PROMPTS[0], "enter")
    for prompt in PROMPTS[1:]:
        app.submit(prompt, SETTINGS)
    await pilot.press(*"Convert the given string to")  # still in the prompt box: the next prompt, unsent

    def pick() -> str | None:
        running = streaming_requests(app, 12)
        return running[-1] if len(running) >= 2 else None

    def refill() -> None:
        for prompt in PROMPTS:
            app.submit(prompt, SETTINGS)

    return await frame_when(pilot, "streaming", pick, lambda svg: svg.count("RUNNING") >= 2, refill)


async def pressure(pilot: Pilot) -> str:
    """A burst into the 48-block pool: a preemption in the log, the preempted request selected."""
    app = await ready(pilot)
    await pilot.press("ctrl+b")

    def pick() -> str | None:
        preempted = [v.req_id for v in app.state.ordered() if v.status == "preempted"]
        return preempted[0] if preempted and any(line.kind == "preempt" for line in app.state.log) else None

    return await frame_when(pilot, "pool-pressure", pick, lambda svg: "PREEMPTED" in svg, lambda: app.burst(8))


async def timeline(pilot: Pilot) -> str:
    """A burst into the 48-block pool with the timeline shown (^t): prefills, decodes, a preemption
    and the recompute after it; the request that was preempted and resumed selected."""
    app = await ready(pilot)
    await pilot.press("ctrl+b", "ctrl+t")

    def pick() -> str | None:
        resumed = [
            lane.req_id
            for lane in app.state.timeline.lanes.values()
            if lane.preemptions and any(phase == RECOMPUTE for phase, _, _ in lane.segments)
        ]
        return resumed[0] if resumed else None

    return await frame_when(pilot, "timeline", pick, lambda svg: "Timeline" in svg, lambda: app.burst(8))


async def paused(pilot: Pilot) -> str:
    """Paused first, then a typed prompt and a `/burst 3`, advanced by single steps (^s) until the
    prompts are well into decoding; the running request with the longest block table selected."""
    app = await ready(pilot)
    await pilot.press("ctrl+p")
    await wait_for(pilot, lambda: app.state.paused, "paused")
    await pilot.press(*PROMPTS[0], "enter")
    app.query_one("#prompt", Input).value = "/burst 3"  # typed in one go
    await pilot.press("enter")
    await wait_for(pilot, lambda: len(app.state.requests) >= 4, "4 requests waiting")
    for _ in range(STEPS_WHILE_PAUSED):
        step = app.state.step
        await pilot.press("ctrl+s")

        def stepped(step: int = step) -> bool:  # the step bound now (B023)
            return app.state.step == step + 1

        await wait_for(pilot, stepped, "one more step")
    running = [v for v in app.state.ordered() if v.status == "running"]
    if not running:
        raise TimeoutError("no request was still running after the single steps")
    await select(pilot, max(running, key=lambda v: len(v.block_ids)).req_id)
    return await frame(pilot, "paused-block-table")


async def help_screen(pilot: Pilot) -> str:
    """The key help over the dashboard."""
    await ready(pilot)
    await pilot.press("f1")
    return await frame(pilot, "help")


async def stopped(pilot: Pilot) -> str:
    """The EngineCore process killed (SIGKILL) while two prompts stream: what the dashboard says then."""
    app = await ready(pilot)
    for prompt in PROMPTS[:2]:
        app.submit(prompt, SETTINGS)
    await wait_for(pilot, lambda: len(streaming_requests(app, 8)) == 2, "two prompts streaming")
    pid = app.engine.engine_pid
    if pid is None:
        raise RuntimeError("the engine runs in this process: there is no EngineCore process to kill")
    os.kill(pid, signal.SIGKILL)
    await wait_for(pilot, lambda: app.phase == "stopped", "the dashboard to see the engine die")
    return await frame(pilot, "engine-stopped")


QUESTIONS = ("What is a class?", "What does the with statement do?")  # the serve-attach scene's chat requests


def traffic(url: str, stop: threading.Event) -> None:
    """Streamed completions and chats, a few at a time, until `stop`."""
    import openai

    client = openai.OpenAI(base_url=f"{url}/v1", api_key="EMPTY", max_retries=0)

    def complete(prompt: str) -> None:
        for _ in client.completions.create(
            model="default", prompt=prompt, max_tokens=96, temperature=0.8, stream=True, extra_body={"ignore_eos": True}
        ):
            if stop.is_set():
                return

    def chat(question: str) -> None:
        for _ in client.chat.completions.create(
            model="default",
            messages=[{"role": "user", "content": question}],
            max_tokens=96,
            temperature=0.8,
            stream=True,
            extra_body={"ignore_eos": True},
        ):
            if stop.is_set():
                return

    while not stop.is_set():
        workers = [threading.Thread(target=complete, args=(p,)) for p in PROMPTS]
        workers += [threading.Thread(target=chat, args=(q,)) for q in QUESTIONS]
        for w in workers:
            w.start()
        for w in workers:
            w.join()


async def serve_attach(pilot: Pilot) -> str:
    app = await ready(pilot)

    def pick() -> str | None:
        running = [r for r in streaming_requests(app, 24) if r.startswith("chatcmpl-")]
        return running[0] if running and len(streaming_requests(app, 12)) >= 4 else None

    return await frame_when(pilot, "serve-attach", pick, lambda svg: svg.count("RUNNING") >= 4)


SCENES = (
    Scene("streaming", streaming),
    Scene("pool-pressure", pressure),
    Scene("paused-block-table", paused),
    Scene("help", help_screen),
    Scene("pool-pressure-80x24", pressure, size=(80, 24)),
    Scene("engine-stopped", stopped),
    Scene("timeline", timeline, size=(120, 44)),
    Scene("serve-attach", serve_attach, served=True),
)


async def capture(scene: Scene, log_file: str) -> str:
    """Start an engine, play the scene on it, return the SVG; the engine is shut down either way."""
    if scene.served:
        return await capture_served(scene)
    engine = open_engine(ENGINE_ARGS, log_file=log_file)
    app = EngineTUI(engine, seed=0, history_interval=0.25, log_file=log_file)
    try:
        async with app.run_test(size=scene.size) as pilot:
            return await scene.play(pilot)
    finally:
        engine.shutdown()


async def capture_served(scene: Scene) -> str:
    """Start `enginetui serve`, attach the dashboard to it, send it traffic, play the scene; stop it all."""
    server = ServeProcess("--num-gpu-blocks-override", str(ENGINE_ARGS["num_gpu_blocks_override"]), "--seed", "0")
    stop = threading.Event()
    try:
        engine = RemoteEngine.connect(server.url, None)
        app = EngineTUI(engine, probe=engine.probe, seed=0, history_interval=0.25)
        try:
            async with app.run_test(size=scene.size) as pilot:
                threading.Thread(target=traffic, args=(server.url, stop), daemon=True).start()
                return await scene.play(pilot)
        finally:
            stop.set()
            engine.shutdown()
    finally:
        server.stop()


def main(out_dir: str = "screenshots", *names: str) -> int:
    """Write OUT_DIR/<scene>.svg for every scene (or the named ones)."""
    out = Path(out_dir)
    out.mkdir(exist_ok=True)
    log_file = str(default_log_file())
    print(f"engine output goes to {log_file}", file=sys.stderr)
    for scene in SCENES:
        if names and scene.name not in names:
            continue
        path = out / f"{scene.name}.svg"
        with route_python_output(log_file):
            svg = asyncio.run(capture(scene, log_file))
        path.write_text(svg, encoding="utf-8")
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
