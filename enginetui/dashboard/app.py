"""The dashboard app: feeds the engine's step events and streamed outputs into the panels.

Engine I/O runs in workers; every event is folded into `DashboardState` as it arrives (cheap),
and a timer pushes the state into the panels at `redraw_hz` at most, so a fast engine costs a
bounded amount of drawing and the engine never waits for the screen.
"""

import asyncio
import itertools
import os
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import ClassVar, cast

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.message import Message
from textual.reactive import var
from textual.widgets import Footer

from enginetui import keys
from enginetui.core.engine.errors import EngineDeadError
from enginetui.core.engine.events import StepEvent
from enginetui.core.models.default_model import DEFAULT_MODEL_DIR
from enginetui.core.sampling_params import SamplingParams
from enginetui.dashboard.bursts import BURST_MAX_TOKENS, burst_requests
from enginetui.dashboard.engine_link import Engine, RefusingEngine, describe, sampling_params
from enginetui.dashboard.logs import KEEP_LOGS, display_path, log_dir
from enginetui.dashboard.prompting_app import MODAL_ACTIONS, NARROW, PromptingApp
from enginetui.dashboard.redraw_pacer import RedrawPacer
from enginetui.dashboard.state import DashboardState
from enginetui.dashboard.widgets.event_log import EventLog
from enginetui.dashboard.widgets.model_panel import ModelPanel, short_count
from enginetui.dashboard.widgets.palette import request_color
from enginetui.dashboard.widgets.pool_grid import PoolGrid
from enginetui.dashboard.widgets.process_panel import (
    ProcessPanel,
    ProcessProbe,
    ProcessSample,
    PsutilProbe,
)
from enginetui.dashboard.widgets.prompt_bar import PromptBar
from enginetui.dashboard.widgets.queues import QueuesPanel
from enginetui.dashboard.widgets.request_detail import RequestDetail
from enginetui.dashboard.widgets.requests_table import RequestsTable
from enginetui.dashboard.widgets.sparklines import Sparklines
from enginetui.dashboard.widgets.step_panel import StepPanel
from enginetui.dashboard.widgets.timeline import TimelinePanel
from enginetui.dashboard.widgets.title_bar import TitleBar
from enginetui.flags.dashboard import DEFAULT_REDRAW_HZ
from enginetui.flags.engine import POOL_HINT
from enginetui.plural import count
from enginetui.settings import SamplingSettings

# What each panel shows, one line each (the help screen's "panels" rows).
PANELS = [
    ("title bar", "the engine's state (▶ running, ⏸ paused, ✖ stopped), its step counter, slow motion, the model"),
    ("process", "the EngineCore process: pid, CPU (100% = one core), resident memory, device"),
    ("Requests", "every request: status, tokens computed/total (characters before the engine lists it), its text"),
    ("Queues", "the scheduler's running and waiting queues, in order, one colour per request"),
    ("Selected request", "the selected request's tokens, timings (queued, TTFT, tok/s) and block table"),
    ("Model", "what the engine reported: architecture, parameters, dtype, context length, KV bytes per token"),
    ("KV pool", "one cell per KV block (or group of blocks), coloured by the request that holds it; legend below it"),
    ("Step", "the latest step: tokens scheduled of the budget (prefill █, decode ▒), its time, its CPU threads"),
    ("Over time", "tokens generated per second, KV %, running and waiting: a point per interval, idle ones too"),
    ("Event log", "admissions, split prefills, preemptions, finishes and rejections, newest last"),
    ("Timeline", "(^t) a lane per request, a column per step: · waiting █ prefill ━ decode ✖ preempted, then its end"),
]

WATCH_ONLY_KEYS = "^p ^s PgDn PgUp"  # the control keys a watch-only server refuses, as the help screen names them
# What the first screen says about the embedded model (lines fit the requests panel in 80 columns).
EMBEDDED_MODEL_NOTE = (
    "the model: a tiny OPT ({params} params)\ntrained on Python's docs: its text\nlooks plausible but is not sensible"
)

# Slow-motion paces PgDn and PgUp step through: the least time between engine steps.
STEP_INTERVALS_MS = (0, 50, 100, 250, 500, 1000, 2000)


class EngineTUI(PromptingApp, App[None], inherit_bindings=False):
    """Live view of one engine: type prompts, watch the scheduler, pool and queues work."""

    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute: subclasses elsewhere keep these styles
    TITLE = "enginetui"
    AUTO_FOCUS: ClassVar[str | None] = (
        "#prompt"  # typing is typing: the prompt box takes every printable key (enginetui/keys.py)
    )
    ENABLE_COMMAND_PALETTE = False
    BINDINGS = [
        keys.PAUSE,
        keys.RESUME,
        keys.STEP,
        keys.burst_key(
            "submit a burst of synthetic requests (--burst-size; /burst N): they ignore EOS and "
            f"generate {BURST_MAX_TOKENS[0]}-{BURST_MAX_TOKENS[1]} tokens each"
        ),
        keys.abort_key("abort the selected request"),
        keys.CLEAR,
        Binding(
            keys.SLOWER,
            "pace(1)",
            "Slower",
            key_display="PgDn",
            priority=True,
            tooltip="slow motion: more time between "
            f"engine steps ({' / '.join(f'{ms} ms' for ms in STEP_INTERVALS_MS[1:])})",
        ),
        Binding(
            keys.FASTER,
            "pace(-1)",
            "Faster",
            key_display="PgUp",
            priority=True,
            tooltip="less time between engine steps, down to full speed",
        ),
        *keys.select_keys(),
        keys.timeline_key(),
        keys.RESTART,
        keys.help_key(),
        *keys.quit_keys("shut the engine down and quit"),
        # On a server that lets dashboards watch only, the control keys leave the footer and say why when pressed.
        Binding(
            "ctrl+p,ctrl+s,pagedown,pageup",
            "watch_only",
            "Watch only",
            show=False,
            priority=True,
            key_display=WATCH_ONLY_KEYS,
            tooltip="on a watch-only server: refused, the notice says why",
        ),
    ]
    # Screen classes by terminal size (app.tcss lays each out): 80x24 is -narrow -short, 100x30 -medium -tall
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (NARROW, "-medium"), (120, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-tall")]
    # App actions that act on the engine: dimmed in the footer, and doing nothing, while there is none ready
    ENGINE_ACTIONS = frozenset({"pause", "resume", "step", "burst", "pace", "abort"})
    CONTROL_ACTIONS = frozenset({"pause", "resume", "step", "pace"})  # refused by a watch-only server

    selected: var[str | None] = var(None)  # id of the request shown in full
    phase: var[str] = var("starting")  # starting | ready | stopped
    paused: var[bool] = var(False)  # what the user last asked the engine to be, or what it became since

    @dataclass
    class EngineLost(Message):
        """The engine's event stream broke or ended."""

        engine: Engine  # the engine that was lost (a restarted one is not)
        reason: str  # why, in words

    def __init__(
        self,
        engine: Engine,
        *,
        probe: ProcessProbe | None = None,
        burst_size: int = 8,
        redraw_hz: float = DEFAULT_REDRAW_HZ,
        max_cpu_share: float = 0.0,
        history_interval: float = 0.5,
        seed: int | None = None,
        log_file: str | None = None,
        step_interval_ms: int = 0,
        reopen: Callable[[], Engine] | None = None,
        random_weights: bool = False,
        serving: str | None = None,
        pool_rule: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self._probe: ProcessProbe = probe or PsutilProbe()  # reads the EngineCore process
        self._burst_size = burst_size  # requests per `b`
        self._redraw_hz = redraw_hz  # most redraws per second
        self.pacer = RedrawPacer(max_cpu_share)  # holds timer redraws back while the app is over its CPU budget
        self._rng = random.Random(seed)  # picks burst prompts and lengths
        self.log_file = log_file  # where the engine's output goes (shown in help and before the first request)
        self._initial_interval_ms = step_interval_ms  # slow motion asked for at start-up (--step-interval-ms)
        self._reopen = reopen  # starts a new engine with the same settings (Ctrl-R after the engine died); blocking
        self.random_weights = random_weights  # the engine runs on random weights (--load-format dummy)
        self.serving = serving  # the URL of the server beside this dashboard (enginetui --serve PORT), or None
        self.pool_rule = pool_rule  # who sized the KV pool, where the engine's rule would mislead (None: the engine's)
        self._ids = itertools.count(1)  # request id numbers
        self._drawn: tuple[int, str | None, str] | None = None  # (state version, selected, phase) on screen
        self._engine_closed = False  # engine.shutdown() was called
        self._control_lock = asyncio.Lock()  # control calls reach the engine one at a time, in order
        self._paces_pending = 0  # slow-motion changes sent but not yet reflected in the state
        self._requested_pace_ms = 0.0  # the last slow-motion pace asked for (the base of the next - / +)
        self._clock = clock  # the dashboard's clock (s): time since the latest event, for idle sparkline points
        self._latest_seen: tuple[float, float] | None = None  # (engine time of the latest event, _clock() then)
        self.engine = engine  # the engine shown (started by the caller or by a restart; shut down on quit)
        self.state = DashboardState(history_interval=history_interval, tokenizer=engine.tokenizer)

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
                yield ModelPanel(id="model", classes="panel")
                yield PoolGrid(id="pool", classes="panel")
                yield StepPanel(id="step", classes="panel")
                yield Sparklines(id="sparks", classes="panel")
                yield EventLog(id="log", classes="panel")
            yield from self.compose_beside()
        yield TimelinePanel(id="timeline", classes="panel")
        yield PromptBar(id="prompt-bar")
        yield Footer()

    def compose_beside(self) -> ComposeResult:
        """Panels a source adds right of the engine's (a real vLLM's /metrics: enginetui/vllm_probe/with_vllm.py)."""
        return ()

    def take_no_input(self) -> None:
        """For a dashboard on a run that takes nothing (a recording, a simulation): no prompt box and no
        process panel, and the requests panel names only the keys that work there. (Such an app has
        AUTO_FOCUS None too: the hidden prompt box would take its keys as text.)"""
        self.query_one(PromptBar).display = False
        self.query_one(ProcessPanel).display = False
        self.query_one(RequestsTable).border_subtitle = keys.SELECT_HINT

    def action_refused(self) -> None:
        """An engine key (keys.refused_keys) in a run that takes no input: say why nothing happens."""
        self.notify(cast(RefusingEngine, self.engine).refusal, severity="warning")  # its keys bound here: it refuses

    def action_watch_only(self) -> None:
        """A control key on a watch-only server: say why nothing happens."""
        self.action_refused()

    def key_rows(self) -> list[tuple[str, str]]:
        """The help screen's key rows; the watch-only row only where the server lets dashboards watch only."""
        rows = super().key_rows()
        return rows if self.watch_only else [row for row in rows if row[0] != WATCH_ONLY_KEYS]

    @property
    def watch_only(self) -> bool:
        """The engine is a server's that lets dashboards watch, not control (RemoteEngine.can_control)."""
        return not getattr(self.engine, "can_control", True)

    def on_mount(self) -> None:
        self.set_interval(1 / self._redraw_hz, self._redraw_tick)
        self.set_interval(1.0, self._sample_process)
        self.set_interval(self.state.history_interval, self._sample_idle_time)
        self._fit_footer(self.size.width)
        self.redraw()
        self._connect()

    # ---- drawing -------------------------------------------------------------------------

    def _draw_key(self) -> tuple[int, str | None, str]:
        """What a redraw shows: (state version, selected request, phase)."""
        return self.state.version, self.selected, self.phase

    def redraw(self) -> None:
        """Push the state into the panels if anything changed since the last redraw."""
        s = self.state
        key = self._draw_key()
        if key == self._drawn:
            return
        try:
            title = self.query_one(TitleBar)
        except NoMatches:  # a last timer tick while the app closes: its widgets are gone
            return
        self._drawn = key
        colors = {v.req_id: request_color(v.index) for v in s.requests.values()}
        restartable = self.phase == "stopped" and self._reopen is not None
        title.show(
            self.engine.model_name,
            s.step,
            self._title_phase(),
            s.step_interval_ms,
            self.random_weights,
            "^r restarts" if restartable else "",
        )
        info = self.engine.info
        self.query_one(ModelPanel).show(info, self.random_weights, self.pool_rule)
        self.query_one(RequestsTable).show(s.ordered(), self.selected, self._empty_hint())
        block_size = s.latest.block_size if s.latest else 0
        self.query_one(RequestDetail).show(s.requests.get(self.selected or ""), s.now, block_size)
        self.query_one(PoolGrid).show(s.latest, colors)
        self.query_one(StepPanel).show(s.latest, s.dropped_events, info.cpu_threads if info is not None else 0)
        self.query_one(QueuesPanel).show(s.latest, colors)
        self.query_one(EventLog).show(s.log, s.latest.total_preemptions if s.latest else 0)
        self.query_one(Sparklines).show(s.history)
        self.query_one(TimelinePanel).show(s.timeline, colors, self.selected)

    def _title_phase(self) -> str:
        """The title bar's state word (TitleBar.PHASES)."""
        if self.phase == "ready":
            return "paused" if self.state.paused else "running"
        return self.phase

    def _sample_process(self) -> None:
        if not self._engine_closed:
            self._read_process(self.engine.engine_pid or os.getpid())

    def _sample_idle_time(self) -> None:
        """Close the sparklines' intervals that ended since the latest event (at the engine time it
        is now: the latest event's time plus the time since it came): idle time draws as idle."""
        if self._latest_seen is not None and self.phase == "ready":
            event_time, seen_at = self._latest_seen
            self.state.advance(event_time + self._clock() - seen_at)

    def _follow(self, event: StepEvent) -> None:
        """Fold one event in; note when the latest one came."""
        event_time = event.time
        self.state.apply_event(event)
        if self.state.latest is event:
            self._latest_seen = (event_time, self._clock())

    @work(thread=True, exclusive=True, group="probe", exit_on_error=False)
    def _read_process(self, pid: int) -> None:
        self.call_from_thread(self._show_process, self._probe(pid))

    def _show_process(self, sample: ProcessSample | None) -> None:
        engine = self.engine
        server = getattr(engine, "url", None)  # a RemoteEngine's server (enginetui attach)
        self.query_one(ProcessPanel).show(sample, engine.engine_pid is None, engine.device, server, engine.engine_pid)

    # ---- engine I/O (workers) ------------------------------------------------------------

    @work(group="connect", exit_on_error=False)
    async def _connect(self) -> None:
        """Take the engine's current state, then follow its step events."""
        try:
            if self._initial_interval_ms:
                await self.engine.set_step_interval(self._initial_interval_ms / 1e3)
            first = await self.engine.snapshot()
        except Exception as exc:
            self.post_message(self.EngineLost(self.engine, describe(exc)))
            return
        self._follow(first)
        self.paused = first.paused
        self.phase = "ready"
        self._follow_events()
        self._sample_process()

    @work(group="events", exit_on_error=False)
    async def _follow_events(self) -> None:
        engine = self.engine
        try:
            async for event in engine.events():
                was_paused = self.state.paused
                self._follow(event)
                if self.state.paused != was_paused:  # paused or resumed, by this dashboard or another
                    self.paused = self.state.paused
            reason = "the engine closed its event stream"
        except Exception as exc:
            reason = describe(exc)
        self.post_message(self.EngineLost(engine, reason))

    @work(group="requests", exit_on_error=False)
    async def _stream(self, req_id: str, prompt: str, params: SamplingParams) -> None:
        engine = self.engine
        final_error = None  # a final "error" output: if EngineDeadError follows it, EngineLost tells it
        failure = None  # why the stream broke off (None: it ended)
        try:
            async for out in engine.generate(prompt, params, req_id):
                if out.finished and out.outputs[0].finish_reason == "error":
                    final_error = out  # held: whichever of it and EngineLost comes first, one picture
                else:
                    self.state.apply_output(out)
        except ValueError as exc:
            self._refuse(req_id, describe(exc))
            return
        except Exception as exc:
            if isinstance(exc, EngineDeadError) and engine is self.engine and not self._engine_closed:
                return  # its event stream ends too: EngineLost fails every request at once, with one reason
            failure = describe(exc)
        if final_error is not None:
            self.state.apply_output(final_error)
        if failure is not None:
            self.state.fail(req_id, failure)

    @work(group="control", exit_on_error=False)
    async def _control(self, call: Callable[[], Awaitable[None]], refresh: bool = True, pace: bool = False) -> None:
        """One control call, after those sent before it; then a snapshot so the screen is current
        even while paused. `pace`: a slow-motion change, counted in _paces_pending until it is done."""
        try:
            async with self._control_lock:
                await call()
                if refresh:
                    self._follow(await self.engine.snapshot())
        except Exception as exc:
            self.paused = self.state.paused  # what the engine is, not what was asked of it
            self.notify(f"engine call failed: {describe(exc)}", severity="error")
        finally:
            self._paces_pending -= pace

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
            again = ": press ^r to start it again" if self._reopen else ""
            self.notify(f"the engine is not running{again}", severity="error")
        return self.phase == "ready"

    @on(EngineLost)
    def _on_engine_lost(self, message: EngineLost) -> None:
        if self._engine_closed or message.engine is not self.engine or self.phase == "stopped":
            return  # we shut it down, or it is an engine replaced by a restart, or already said
        self.phase = "stopped"
        for view in self.state.ordered():
            self.state.fail(view.req_id, f"engine stopped: {message.reason}")
        again = " · ^r starts it again" if self._reopen else ""
        self.notify(f"{message.reason}{again}", title="The engine stopped", severity="error", timeout=10)

    def burst(self, count: int) -> None:
        """Submit `count` synthetic requests: random prompts, the current sampling settings, but
        past EOS and a random length in BURST_MAX_TOKENS, so the pool really fills."""
        if self._engine_ready():
            for prompt, settings in burst_requests(self._rng, self.query_one(PromptBar).settings, count):
                self.submit(prompt, settings)

    # ---- actions -------------------------------------------------------------------------

    def action_pause(self) -> None:
        if self._engine_ready():
            self.paused = True
            self._control(self.engine.pause)

    def action_resume(self) -> None:
        if self._engine_ready():
            self.paused = False
            self._control(self.engine.resume)

    def action_step(self) -> None:
        if not self._engine_ready():
            return
        if not self.paused:
            self.notify("^s runs one step of a paused engine: press ^p to pause first", severity="warning")
            return
        self._control(self.engine.step_once, refresh=False)  # the step's own event follows

    def action_pace(self, direction: int) -> None:
        """Step slow motion one level slower (+1) or faster (-1) through STEP_INTERVALS_MS, from the
        last pace asked for while a change is still on its way, else from the engine's."""
        if not self._engine_ready():
            return
        current = self._requested_pace_ms if self._paces_pending else self.state.step_interval_ms
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
        self._requested_pace_ms = target
        self._paces_pending += 1  # now, not when the worker starts: the next key may come first
        self._control(partial(self.engine.set_step_interval, target / 1e3), pace=True)

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

    def action_toggle_timeline(self) -> None:
        timeline = self.query_one(TimelinePanel)
        timeline.display = not timeline.display

    def action_clear(self) -> None:
        cleared = self.state.clear_ended()
        if self.selected not in self.state.requests:
            self.selected = self.state.neighbour(None, 1)
        if not cleared:
            self.notify("no ended requests to clear", severity="warning")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Which keys apply (the footer shows only those): over the help screen only help and quit; the
        engine's keys dimmed (None) while it is starting or stopped; Ctrl+R only once the engine has
        stopped and can be started again; Ctrl+P pauses a running engine and resumes a paused one; on a
        watch-only server the control keys are not offered (pressed, they say why: `watch_only`)."""
        if len(self.screen_stack) > 1 and action not in MODAL_ACTIONS:
            return False
        if action == "watch_only":
            return self.watch_only
        if action in self.CONTROL_ACTIONS and self.watch_only:
            return False
        if action in self.ENGINE_ACTIONS and self.phase != "ready":
            return None
        if action == "restart":
            return self.phase == "stopped" and self._reopen is not None
        if action in ("pause", "resume"):  # ^p is one or the other
            return self.paused == (action == "resume")
        return True

    def watch_phase(self, phase: str) -> None:
        self.refresh_bindings()  # r comes and goes with the engine
        self.query_one("#main").set_class(phase == "stopped", "-stopped")  # the engine's panels fade

    def watch_paused(self) -> None:
        self.refresh_bindings()  # ^p: Pause or Resume

    def action_help(self) -> None:
        self.show_help(PANELS, self.about())

    def _empty_hint(self) -> str:
        """What the requests panel says before the first request: how to start, where the engine log is."""
        hint = "no requests yet: just type a prompt\nand press Enter · ^b sends a burst"  # lines fit 80 columns
        if not self.watch_only:
            hint += "\n· PgDn slow motion: watch each step"
        info = self.engine.info
        if info is not None and info.model_dir == str(DEFAULT_MODEL_DIR):
            hint += "\n\n" + EMBEDDED_MODEL_NOTE.format(params=short_count(info.num_parameters))
        if self.log_file:
            hint += f"\n\nengine output (F1 shows it again):\n{display_path(self.log_file)}"
        return hint

    def about(self) -> list[tuple[str, str]]:
        """The help screen's engine rows: its KV pool and where its output goes."""
        event = self.state.latest
        pool = f"{count(event.num_blocks, 'block')} × {event.block_size} tok · " if event else ""
        if self.log_file:
            log = f"{display_path(self.log_file)} · EngineCore's stdout, stderr, logging and warnings"
            if Path(self.log_file).parent == log_dir():
                log += f" (the last {KEEP_LOGS} logs there are kept)"
        else:
            log = "none: the engine writes wherever it was started"
        rows = [("KV pool", f"{pool}{POOL_HINT}"), ("engine log", log)]
        if self.serving:
            rows.append(
                (
                    "server",
                    f"{self.serving}, this engine over the OpenAI API (others: `enginetui attach {self.serving}`)",
                )
            )
        return rows

    def action_restart(self) -> None:
        """Start a new engine with the same settings after the last one died; the requests stay listed."""
        if self.phase != "stopped" or self._reopen is None:
            return
        self.phase = "starting"
        self._initial_interval_ms = round(self.state.step_interval_ms)  # keep the slow motion it had
        self.engine.shutdown()  # reaps what is left of the dead one
        self._restart(self._reopen)

    @work(thread=True, group="restart", exclusive=True, exit_on_error=False)
    def _restart(self, reopen: Callable[[], Engine]) -> None:
        try:
            engine = reopen()
        except Exception as exc:
            self.call_from_thread(self._restart_failed, describe(exc))
            return
        try:
            self.call_from_thread(self._restarted, engine)
        except Exception:  # the app closed while the engine started: it is nobody's
            engine.shutdown()
            raise

    def _restarted(self, engine: Engine) -> None:
        if self._engine_closed:  # quit while it started
            engine.shutdown()
            return
        self.engine = engine
        self.state.new_engine()
        self._connect()

    def _restart_failed(self, reason: str) -> None:
        self.phase = "stopped"
        self.notify(f"the engine did not start again: {reason}", severity="error", timeout=20)

    async def action_quit(self) -> None:
        self._close_engine()
        self.exit()

    def on_unmount(self) -> None:
        self._close_engine()

    def _close_engine(self) -> None:
        if not self._engine_closed:
            self._engine_closed = True
            self.engine.shutdown()
