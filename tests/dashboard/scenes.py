"""The dashboard's main states, driven against the real engine with the scripted model runner
(tests/fakes/scripted_engine.py): the SVG snapshot tests (test_snapshots.py) replay these
scenes, and the Pilot tests use their helpers.

Every run draws the same pictures: the engine is stepped by hand (paused, one `step` control at a
time) on a pinned clock and the process panel shows a fixed reading. (tools/screenshots.py draws the
same states from the real model for screenshots/.)
"""

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from textual.notifications import SeverityLevel
from textual.pilot import Pilot

from enginetui.dashboard.app import EngineTUI
from enginetui.dashboard.widgets.process_panel import ProcessPanel, ProcessSample
from tests.fakes.scripted_engine import ScriptedEngine

SIZE = (120, 40)  # terminal columns, rows
FIXED_PROCESS = ProcessSample(pid=4242, cpu_percent=37.0, rss_mb=412.0)  # no live readings in pictures
FROZEN_CLOCK = lambda: 0.0  # noqa: E731 — the dashboard's clock stands still: only the fake engine's moves time
PROMPTS = (
    "Once upon a time in a quiet river town",
    "Explain paged attention: the KV cache lives in fixed size blocks and a block table maps each "
    "request's logical blocks to physical blocks in one shared pool",
    "The capital of France is",
    "Write a haiku about a scheduler that never sleeps",
)


@dataclass(frozen=True, slots=True)
class Scene:
    """One screenshot: an engine and what to do with the app before the picture."""

    name: str  # file name (without .svg)
    engine: Callable[[], ScriptedEngine]  # builds the scene's engine
    play: Callable[[Pilot], Awaitable[None]]  # drives the app into the state to picture


def make_app(engine: ScriptedEngine) -> EngineTUI:
    """The app over `engine`, with a restart that gets a new hand-stepped engine (`r`)."""
    return EngineTUI(
        engine,
        probe=lambda pid: FIXED_PROCESS,
        seed=0,
        history_interval=0.1,
        reopen=lambda: ScriptedEngine(autostep=False),
        clock=FROZEN_CLOCK,
    )


async def settle(pilot: Pilot, done: Callable[[], bool] = lambda: True, timeout: float = 120.0) -> None:
    """Let the workers run until `done()`, every control call sent (pause, pace, step...) has returned and the
    engine's events and outputs are consumed, then redraw. The deadline is generous: on 2 cores beside
    parallel test workers and a vLLM compile, the engine thread can lag well behind the app."""
    app = pilot.app
    assert isinstance(app, EngineTUI)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout

    def controls_done() -> bool:
        return not any(w.group == "control" and not w.is_finished for w in app.workers)

    while not (done() and controls_done() and app.engine.drained()):
        if loop.time() > deadline:
            raise TimeoutError(
                f"the dashboard did not settle (done: {done()}, control calls done: {controls_done()}, "
                f"engine drained: {app.engine.drained()}; "
                f"{app.engine.why_not_drained()})"
            )
        await pilot.pause(0.01)
    app.redraw()
    await pilot.pause()


async def start(pilot: Pilot) -> EngineTUI:
    """Wait for the engine to connect and the process panel to show its reading."""
    app = pilot.app
    assert isinstance(app, EngineTUI)
    await settle(pilot, lambda: app.phase == "ready")
    await settle(pilot, lambda: app.query_one(ProcessPanel).has_sample)
    return app


def submit(app: EngineTUI, prompts: tuple[str, ...]) -> None:
    """Send each prompt with the settings bar's values."""
    for prompt in prompts:
        app.submit(prompt, app.query_one("PromptBar").settings)


async def advance(pilot: Pilot, steps: int) -> None:
    """Run `steps` engine steps one at a time (once every request sent has reached the engine),
    letting the app take in each."""
    app = pilot.app
    assert isinstance(app, EngineTUI)
    await settle(pilot, lambda: all(v.status != "sent" for v in app.state.requests.values()))
    for _ in range(steps):
        target = app.state.step + 1
        await app.engine.step_once()
        await settle(pilot, lambda target=target: app.state.step >= target)


async def streaming(pilot: Pilot) -> None:
    """Four prompts mid-generation (the long one was split by chunked prefill); the second selected."""
    app = await start(pilot)
    submit(app, PROMPTS)
    await advance(pilot, 14)
    await pilot.press("down")
    await settle(pilot)


async def pressure(pilot: Pilot) -> None:
    """A burst into a small pool: preemptions in the log, a preempted request selected."""
    app = await start(pilot)
    await pilot.press("ctrl+b")
    while not any(line.kind == "preempt" for line in app.state.log):
        await advance(pilot, 1)
    app.selected = next(v.req_id for v in app.state.ordered() if v.num_preemptions)
    await settle(pilot)


async def paused(pilot: Pilot) -> None:
    """Paused (as a hand-stepped engine is) after a few steps, one more taken with the s key, the
    second request's block table selected."""
    app = await start(pilot)
    submit(app, PROMPTS[:3])
    await advance(pilot, 9)
    step = app.state.step
    await pilot.press("ctrl+s")
    await settle(pilot, lambda: app.state.step == step + 1)
    await pilot.press("down")
    await settle(pilot)


async def help_screen(pilot: Pilot) -> None:
    """The key help over the dashboard."""
    await start(pilot)
    await pilot.press("f1")
    await settle(pilot)


async def typing(pilot: Pilot) -> None:
    """A command half typed into the prompt box (it has the focus from the start)."""
    app = await start(pilot)
    submit(app, PROMPTS[:1])
    await advance(pilot, 3)
    await pilot.press(*"/burst", "space", "1", "6")
    await settle(pilot)


async def stopped(pilot: Pilot) -> None:
    """The engine died under two requests: said in the title, the requests failed, r offered."""
    app = await start(pilot)
    submit(app, PROMPTS[:2])
    await advance(pilot, 4)
    app.engine.die()
    await settle(pilot, lambda: app.phase == "stopped")
    app.clear_notifications()  # the toast times out; the picture shows what stays
    await settle(pilot)


SCENES = (
    Scene("streaming", lambda: ScriptedEngine(num_blocks=128, token_budget=32, autostep=False), streaming),
    Scene("pool-pressure", lambda: ScriptedEngine(num_blocks=24, token_budget=48, autostep=False), pressure),
    Scene("paused-block-table", lambda: ScriptedEngine(num_blocks=64, token_budget=48, autostep=False), paused),
    Scene("help", lambda: ScriptedEngine(autostep=False), help_screen),
    Scene("typing", lambda: ScriptedEngine(autostep=False), typing),
    Scene("stopped", lambda: ScriptedEngine(autostep=False), stopped),
)


class RecordingApp(EngineTUI):
    """EngineTUI that remembers every notification it shows."""

    def __init__(self, engine: ScriptedEngine, **kwargs) -> None:
        super().__init__(engine, probe=lambda pid: FIXED_PROCESS, seed=0, **kwargs)
        self.fake = engine  # the engine under the app
        self.notes: list[tuple[SeverityLevel, str]] = []  # (severity, message) of each notification

    def notify(self, message, *, severity: SeverityLevel = "information", **kwargs) -> None:
        self.notes.append((severity, str(message)))
        super().notify(message, severity=severity, **kwargs)
