"""The dashboard app: feeds the engine's step events and streamed outputs into the panels.

Engine I/O runs in workers; every event is folded into `DashboardState` as it arrives (cheap),
and a timer pushes the state into the panels at `redraw_hz` at most, so a fast engine costs a
bounded amount of drawing and the engine never waits for the screen.
"""

import itertools
import os
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.message import Message
from textual.reactive import var
from textual.widgets import Footer

from core.sampling_params import SamplingParams
from enginetui.engine_flags import POOL_HINT
from enginetui.engine_link import Engine, sampling_params
from enginetui.logs import display_path
from enginetui.prompts import BURST_MAX_TOKENS, BURST_PROMPTS
from enginetui.settings import SamplingSettings
from enginetui.state import DashboardState
from enginetui.widgets.event_log import EventLog
from enginetui.widgets.help_screen import HelpScreen
from enginetui.widgets.palette import request_color
from enginetui.widgets.pool_grid import PoolGrid
from enginetui.widgets.process_panel import (
    ProcessPanel,
    ProcessProbe,
    ProcessSample,
    PsutilProbe,
)
from enginetui.widgets.prompt_bar import PromptBar
from enginetui.widgets.queues import QueuesPanel
from enginetui.widgets.request_detail import RequestDetail
from enginetui.widgets.requests_table import RequestsTable
from enginetui.widgets.sparklines import Sparklines
from enginetui.widgets.step_panel import StepPanel
from enginetui.widgets.title_bar import TitleBar


def describe(exc: BaseException) -> str:
    """An exception as one readable line (no traceback)."""
    return str(exc) or type(exc).__name__


# Slow-motion paces the - and + keys step through: the least time between engine steps.
STEP_INTERVALS_MS = (0, 50, 100, 250, 500, 1000, 2000)


class EngineTUI(App[None]):
    """Live view of one engine: type prompts, watch the scheduler, pool and queues work."""

    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute: subclasses elsewhere keep these styles
    TITLE = "enginetui"
    AUTO_FOCUS = None  # keys drive the dashboard until the prompt box is entered (i / Enter)
    ENABLE_COMMAND_PALETTE = False
    BINDINGS = [
        Binding("space", "toggle_pause", "Pause/resume", tooltip="pause or resume the engine"),
        Binding("s", "step", "Step", tooltip="run exactly one engine step (while paused)"),
        Binding("x", "abort", "Abort", tooltip="abort the selected request"),
        Binding("b", "burst", "Burst", tooltip="submit a burst of synthetic requests (--burst-size; /burst N): "
                f"they ignore EOS and generate {BURST_MAX_TOKENS[0]}-{BURST_MAX_TOKENS[1]} tokens each"),
        Binding("c", "clear", "Clear", tooltip="clear ended requests from the list"),
        Binding("minus", "pace(1)", "Slower", tooltip="slow motion: more time between engine steps "
                f"({' / '.join(f'{ms} ms' for ms in STEP_INTERVALS_MS[1:])})"),
        Binding("plus,equals_sign", "pace(-1)", "Faster", key_display="+",
                tooltip="less time between engine steps, down to full speed"),
        Binding("up", "select(-1)", "Select", show=False, tooltip="select the previous request (or click it)"),
        Binding("down", "select(1)", "Select", show=False, tooltip="select the next request (or click it)"),
        Binding("i,enter", "focus_prompt", "Prompt", tooltip="type in the prompt box"),
        Binding("question_mark", "help", "Help", tooltip="this screen"),
        Binding("q", "quit", "Quit", tooltip="shut the engine down and quit"),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True, tooltip="shut the engine down and quit"),
    ]

    selected: var[str | None] = var(None)  # id of the request shown in full
    phase: var[str] = var("starting")  # starting | ready | stopped
    paused: var[bool] = var(False)  # what the user last asked the engine to be

    @dataclass
    class EngineLost(Message):
        """The engine's event stream broke or ended."""

        reason: str  # why, in words

    def __init__(
        self,
        engine: Engine,
        *,
        probe: ProcessProbe | None = None,
        burst_size: int = 8,
        redraw_hz: float = 15.0,
        history_interval: float = 0.5,
        seed: int | None = None,
        log_file: str | None = None,
        step_interval_ms: int = 0,
    ) -> None:
        super().__init__()
        self._probe: ProcessProbe = probe or PsutilProbe()  # reads the EngineCore process
        self._burst_size = burst_size  # requests per `b`
        self._redraw_hz = redraw_hz  # most redraws per second
        self._rng = random.Random(seed)  # picks burst prompts and lengths
        self.log_file = log_file  # where the engine's output goes (shown in help and at start-up)
        self._initial_interval_ms = step_interval_ms  # slow motion asked for at start-up (--step-interval-ms)
        self._ids = itertools.count(1)  # request id numbers
        self._drawn: tuple[int, str | None, str] | None = None  # (state version, selected, phase) on screen
        self._engine_closed = False  # engine.shutdown() was called
        self.engine = engine  # the engine shown (started by the caller; shut down on quit)
        self.state = DashboardState(history_interval=history_interval)

    def compose(self) -> ComposeResult:
        with Horizontal(id="top"):
            yield TitleBar(id="title")
            yield ProcessPanel(id="process")
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield RequestsTable(id="requests", classes="panel")
                yield QueuesPanel(id="queues", classes="panel")
                yield RequestDetail(id="detail", classes="panel")
            with Vertical(id="right"):
                yield PoolGrid(id="pool", classes="panel")
                yield StepPanel(id="step", classes="panel")
                yield Sparklines(id="sparks", classes="panel")
                yield EventLog(id="log", classes="panel")
        yield PromptBar(id="prompt-bar")
        yield Footer()

    def on_mount(self) -> None:
        self.set_interval(1 / self._redraw_hz, self.redraw)
        self.set_interval(1.0, self._sample_process)
        self.redraw()
        self._connect()

    # ---- drawing -------------------------------------------------------------------------

    def redraw(self) -> None:
        """Push the state into the panels if anything changed since the last redraw."""
        s = self.state
        key = (s.version, self.selected, self.phase)
        if key == self._drawn:
            return
        try:
            title = self.query_one(TitleBar)
        except NoMatches:  # a last timer tick while the app closes: its widgets are gone
            return
        self._drawn = key
        colors = {v.req_id: request_color(v.index) for v in s.requests.values()}
        running = "paused" if s.paused else "running"
        title.show(self.engine.model_name, s.step, running if self.phase == "ready" else self.phase,
                                      s.step_interval_ms)
        self.query_one(RequestsTable).show(s.ordered(), self.selected)
        block_size = s.latest.block_size if s.latest else 0
        self.query_one(RequestDetail).show(s.requests.get(self.selected or ""), s.now, block_size)
        self.query_one(PoolGrid).show(s.latest, colors)
        self.query_one(StepPanel).show(s.latest, s.dropped_events)
        self.query_one(QueuesPanel).show(s.latest, colors)
        self.query_one(EventLog).show(s.log, s.latest.total_preemptions if s.latest else 0)
        self.query_one(Sparklines).show(s.history)

    def _sample_process(self) -> None:
        if not self._engine_closed:
            self._read_process(self.engine.engine_pid or os.getpid())

    @work(thread=True, exclusive=True, group="probe", exit_on_error=False)
    def _read_process(self, pid: int) -> None:
        self.call_from_thread(self._show_process, self._probe(pid))

    def _show_process(self, sample: ProcessSample | None) -> None:
        self.query_one(ProcessPanel).show(sample, self.engine.engine_pid is None, self.engine.device)

    # ---- engine I/O (workers) ------------------------------------------------------------

    @work(group="connect", exit_on_error=False)
    async def _connect(self) -> None:
        """Take the engine's current state, then follow its step events."""
        try:
            if self._initial_interval_ms:
                await self.engine.set_step_interval(self._initial_interval_ms / 1e3)
            first = await self.engine.snapshot()
        except Exception as exc:
            self.post_message(self.EngineLost(describe(exc)))
            return
        self.state.apply_event(first)
        self.paused = first.paused
        self.phase = "ready"
        if self.log_file:
            self.notify(f"engine output goes to {display_path(self.log_file)} (? shows it again)",
                        title="engine log", timeout=8)
        self._follow_events()
        self._sample_process()

    @work(group="events", exit_on_error=False)
    async def _follow_events(self) -> None:
        try:
            async for event in self.engine.events():
                self.state.apply_event(event)
            reason = "the engine closed its event stream"
        except Exception as exc:
            reason = describe(exc)
        self.post_message(self.EngineLost(reason))

    @work(group="requests", exit_on_error=False)
    async def _stream(self, req_id: str, prompt: str, params: SamplingParams) -> None:
        try:
            async for out in self.engine.generate(prompt, params, req_id):
                self.state.apply_output(out)
        except ValueError as exc:
            self._refuse(req_id, describe(exc))
        except Exception as exc:
            self.state.fail(req_id, describe(exc))

    @work(group="control", exit_on_error=False)
    async def _control(self, call: Callable[[], Awaitable[None]], refresh: bool = True) -> None:
        """One control call; then a snapshot so the screen is current even while paused."""
        try:
            await call()
            if refresh:
                self.state.apply_event(await self.engine.snapshot())
        except Exception as exc:
            self.notify(f"engine call failed: {describe(exc)}", severity="error")

    # ---- submitting ----------------------------------------------------------------------

    def submit(self, prompt: str, settings: SamplingSettings) -> None:
        """Send one prompt as a new request (r1, r2, ...)."""
        if not self._engine_ready():
            return
        req_id = f"r{next(self._ids)}"
        self.state.add_request(req_id, prompt, settings.max_tokens)
        shown = self.state.requests.get(self.selected or "")
        if shown is None or not shown.active:  # nothing live selected: follow the new request
            self.selected = req_id
        try:
            params = sampling_params(settings)
        except ValueError as exc:
            self._refuse(req_id, describe(exc))
            return
        self._stream(req_id, prompt, params)

    def _refuse(self, req_id: str, message: str) -> None:
        self.state.refuse(req_id, message)
        self.notify(f"{req_id} rejected: {message}", severity="error")

    def _engine_ready(self) -> bool:
        if self.phase == "starting":
            self.notify("the engine is still starting", severity="warning")
        elif self.phase == "stopped":
            self.notify("the engine is not running", severity="error")
        return self.phase == "ready"

    @on(PromptBar.Submitted)
    def _on_prompt(self, message: PromptBar.Submitted) -> None:
        self.submit(message.text, message.settings)

    @on(PromptBar.BurstRequested)
    def _on_burst(self, message: PromptBar.BurstRequested) -> None:
        self.burst(message.count)

    @on(PromptBar.HelpRequested)
    def _on_help(self) -> None:
        self.action_help()

    @on(RequestsTable.Clicked)
    def _on_row_clicked(self, message: RequestsTable.Clicked) -> None:
        self.selected = message.req_id

    @on(EngineLost)
    def _on_engine_lost(self, message: EngineLost) -> None:
        if self._engine_closed:
            return
        self.phase = "stopped"
        for view in self.state.ordered():
            self.state.fail(view.req_id, f"engine stopped: {message.reason}")
        self.notify(f"engine stopped: {message.reason}", title="EngineCore", severity="error", timeout=30)

    def burst(self, count: int) -> None:
        """Submit `count` synthetic requests: random prompts, the current sampling settings, but
        past EOS and a random length in BURST_MAX_TOKENS, so the pool really fills."""
        settings = self.query_one(PromptBar).settings
        if self._engine_ready():
            for _ in range(count):
                prompt = self._rng.choice(BURST_PROMPTS)
                length = self._rng.randint(*BURST_MAX_TOKENS)
                self.submit(prompt, replace(settings, max_tokens=length, ignore_eos=True))

    # ---- actions -------------------------------------------------------------------------

    def action_toggle_pause(self) -> None:
        if self._engine_ready():
            self.paused = not self.paused
            self._control(self.engine.pause if self.paused else self.engine.resume)

    def action_step(self) -> None:
        if not self._engine_ready():
            return
        if not self.paused:
            self.notify("s runs one step of a paused engine: press space to pause first", severity="warning")
            return
        self._control(self.engine.step_once, refresh=False)  # the step's own event follows

    def action_pace(self, direction: int) -> None:
        """Step slow motion one level slower (+1) or faster (-1) through STEP_INTERVALS_MS."""
        if not self._engine_ready():
            return
        current = self.state.step_interval_ms
        if direction > 0:
            levels = [ms for ms in STEP_INTERVALS_MS if ms > current]
            if not levels:
                self.notify(f"already the slowest: {current:.0f} ms per step", severity="warning")
                return
            target = levels[0]
        else:
            levels = [ms for ms in STEP_INTERVALS_MS if ms < current]
            if not levels:
                self.notify("already at full speed", severity="warning")
                return
            target = levels[-1]
        self._control(partial(self.engine.set_step_interval, target / 1e3))

    def action_abort(self) -> None:
        view = self.state.requests.get(self.selected or "")
        if view is None:
            self.notify("select a request with ↑↓ first", severity="warning")
        elif not view.active:
            self.notify(f"{view.req_id} is already {view.status}", severity="warning")
        elif self._engine_ready():
            self._control(partial(self.engine.abort, view.req_id))

    def action_burst(self) -> None:
        self.burst(self._burst_size)

    def action_select(self, delta: int) -> None:
        self.selected = self.state.neighbour(self.selected, delta)

    def action_clear(self) -> None:
        cleared = self.state.clear_ended()
        if self.selected not in self.state.requests:
            self.selected = self.state.neighbour(None, 1)
        if not cleared:
            self.notify("no ended requests to clear", severity="warning")

    def action_focus_prompt(self) -> None:
        self.query_one(PromptBar).focus_prompt()

    def action_help(self) -> None:
        keys = [(self.get_key_display(b), b.tooltip) for b in self.BINDINGS if isinstance(b, Binding)]
        self.push_screen(HelpScreen(keys, self.about()))

    def about(self) -> list[tuple[str, str]]:
        """The help screen's engine rows: its KV pool and where its output goes."""
        event = self.state.latest
        pool = f"{event.num_blocks} blocks × {event.block_size} tok · " if event else ""
        if self.log_file:
            log = f"{display_path(self.log_file)} · EngineCore's stdout, stderr, logging and warnings"
        else:
            log = "none: the engine writes wherever it was started"
        return [("KV pool", f"{pool}{POOL_HINT}"), ("engine log", log)]

    async def action_quit(self) -> None:
        self._close_engine()
        self.exit()

    def on_unmount(self) -> None:
        self._close_engine()

    def _close_engine(self) -> None:
        if not self._engine_closed:
            self._engine_closed = True
            self.engine.shutdown()
