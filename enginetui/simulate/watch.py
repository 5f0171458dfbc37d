"""`enginetui simulate --watch`: a simulated run shown live in the dashboard, paced by its clock.

The simulation runs in a thread; each step event it builds (the same events `--record` writes) goes
through a bounded queue (the simulation waits while the dashboard is behind) to `SimulatedEngine`,
the dashboard's Engine: it hands them on when the wall clock reaches their simulated time divided by
the speed (speed 0: as fast as they can be drawn). The app is the live dashboard with nothing to send:
its title says the run is simulated and by which step-time model, and when it has finished.
"""

import asyncio
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable

from rich.text import Text

from enginetui import keys
from enginetui.core.engine.engine_info import EngineInfo
from enginetui.core.engine.events import StepEvent
from enginetui.dashboard.app import EngineTUI
from enginetui.dashboard.no_input_engine import NoInputEngine
from enginetui.dashboard.widgets.title_bar import TitleBar
from enginetui.simulate.event_sinks import EventSink

QUEUE_EVENTS = 256  # events built ahead of the dashboard, at most
POLL_S = 0.01  # how often the dashboard looks for the next event while none is ready
SIMULATED_ONLY = "this is a simulated run: nothing can be sent to it"


class _Stopped(Exception):
    """The dashboard closed: the simulation stops at its next event."""


class _End:
    """The queue's last item: the run is over (`error`: why it failed, None when it finished)."""

    def __init__(self, error: str | None) -> None:
        self.error = error  # the failure in words (None: the run finished)


class _QueueSink(EventSink):
    """The simulation thread's side of the queue."""

    def __init__(self, source: "LiveSimulation") -> None:
        self.source = source  # the queue and the stop flag

    def emit(self, event: StepEvent) -> None:
        self.source.put(event)


class LiveSimulation:
    """Runs `run(live)` (a simulate() call taking the live sink factory) in a thread and queues its events."""

    def __init__(self, run: Callable[[Callable[[EngineInfo, str], EventSink]], object]) -> None:
        self.queue: queue.Queue = queue.Queue(QUEUE_EVENTS)  # EngineInfo, then StepEvents, then an _End
        self.stop = threading.Event()  # set when the dashboard closes
        self.result = None  # the SimResult once the run has finished
        self._thread = threading.Thread(target=self._run, args=(run,), name="simulate-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def put(self, item) -> None:
        """Queue one item, waiting while the queue is full (raises _Stopped once the dashboard closed)."""
        while not self.stop.is_set():
            try:
                self.queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue
        raise _Stopped

    def _sink(self, info: EngineInfo, source: str) -> EventSink:
        self.put(info)
        return _QueueSink(self)

    def _run(self, run) -> None:
        try:
            self.result = run(self._sink)
            end = _End(None)
        except _Stopped:
            return
        except (ValueError, OSError) as exc:
            end = _End(str(exc))
        try:
            self.put(end)
        except _Stopped:
            pass

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)


class SimulatedEngine(NoInputEngine):
    """Implements enginetui.dashboard.engine_link.Engine for a simulated run: step events paced by simulated time
    (every call that would change an engine is refused: enginetui/dashboard/no_input_engine.py)."""

    refusal = SIMULATED_ONLY

    def __init__(self, live: LiveSimulation, speed: float, model_name: str) -> None:
        if speed < 0:
            raise ValueError(f"--speed must be 0 (as fast as it can be drawn) or more, not {speed:g}")
        self.live = live  # the running simulation
        self.speed = speed  # simulated seconds per wall second (0: no pacing)
        self.info: EngineInfo | None = None  # the simulated engine (set when the run starts)
        self.engine_pid = None  # no engine process
        self.tokenizer = None  # stand-in tokens: no text
        self.finished = False  # the run's last event has been handed on
        self.events_shown = 0  # events handed to the dashboard
        self._model_name = model_name  # until the run says its own
        self._clock: tuple[float, float] | None = None  # (wall time.monotonic(), simulated time) at the first event

    @property
    def model_name(self) -> str:
        return self.info.model_name if self.info else self._model_name

    @property
    def device(self) -> str:
        return self.info.device if self.info else "simulated"

    async def _next(self):
        """The next queued item (waits without blocking the event loop)."""
        while True:
            try:
                return self.live.queue.get_nowait()
            except queue.Empty:
                await asyncio.sleep(POLL_S)

    async def _next_event(self) -> StepEvent | None:
        """The next step event, when its simulated time is due (None: the run is over)."""
        item = await self._next()
        while isinstance(item, EngineInfo):
            self.info = item
            item = await self._next()
        if isinstance(item, _End):
            if item.error:
                raise RuntimeError(f"the simulation failed: {item.error}")
            self.finished = True
            return None
        if self._clock is None:
            self._clock = (time.monotonic(), item.time)
        elif self.speed > 0:
            due = self._clock[0] + (item.time - self._clock[1]) / self.speed
            await asyncio.sleep(max(0.0, due - time.monotonic()))
        else:
            await asyncio.sleep(0)  # let the dashboard draw between events
        self.events_shown += 1
        return item

    async def snapshot(self) -> StepEvent:
        """The first step event (the dashboard folds it in before following the rest)."""
        first = await self._next_event()
        if first is None:
            raise RuntimeError("the simulated run had no steps")
        return first

    async def events(self) -> AsyncIterator[StepEvent]:
        while (event := await self._next_event()) is not None:
            yield event
        await asyncio.Event().wait()  # finished: the last state stays on screen until the app quits

    def shutdown(self) -> None:
        self.live.stop.set()


class SimWatchTUI(EngineTUI, inherit_bindings=False):
    """The dashboard following a simulated run."""

    AUTO_FOCUS = None  # no prompt box: a simulation takes no text, only keys (focused, the hidden box took them)
    BINDINGS = [
        keys.timeline_key(plain=True),
        *keys.select_keys(),
        keys.refused_keys(
            "ctrl+b,ctrl+x,ctrl+l,ctrl+p,ctrl+s", "bursts, aborts, clearing, pause and step: not in a simulated run"
        ),
        keys.help_key(plain=True),
        *keys.quit_keys("stop the simulation and quit", plain=True),
    ]

    def __init__(self, engine: SimulatedEngine, **kwargs) -> None:
        super().__init__(engine, **kwargs)
        self.sim = engine  # the simulated run's engine (pacing, finished)

    def on_mount(self) -> None:
        self.take_no_input()  # nothing can be sent to a simulation, no engine process runs
        super().on_mount()

    def _sample_process(self) -> None:
        """No process to read."""

    def _empty_hint(self) -> str:
        return "the simulated run has not started yet"

    def _draw_key(self):
        return (*super()._draw_key(), self.sim.finished)

    def redraw(self) -> None:
        drawn = self._drawn
        super().redraw()
        if self._drawn != drawn:
            for title in self.query(TitleBar):
                title.update(self.title_text())

    def title_text(self) -> Text:
        """`enginetui ◆ simulated (roofline h200 …) · step N · 1.23 s simulated · 10x · model`."""
        s, sim = self.state, self.sim
        text = Text("enginetui ", style="bold")
        text.append(f"◆ {sim.device}", style="bold #c678dd")
        if self.phase == "stopped":
            text.append(" · stopped", style="bold #be5046")
        elif sim.finished:
            text.append(" · finished", style="bold #98c379")
        text.append(f" · step {s.step}")
        if s.latest is not None:
            text.append(f" · {s.latest.time:.2f} s simulated")
        text.append(f" · {sim.speed:g}x" if sim.speed > 0 else " · as fast as drawn", style="bold #61afef")
        text.append(f" · {sim.model_name}")
        return text

    def about(self) -> list[tuple[str, str]]:
        info = self.sim.info
        rows = [("run", "simulated: the engine's scheduler and KV manager on a step-time model, no model runs")]
        if info is not None:
            rows.append(
                (
                    "engine",
                    f"{info.model_name} · {info.device} · {info.dtype} · "
                    f"{info.num_blocks} blocks × {info.block_size} tok",
                )
            )
        rows.append(
            (
                "pace",
                f"{self.sim.speed:g} simulated seconds per second"
                if self.sim.speed > 0
                else "as fast as it can be drawn",
            )
        )
        return rows
