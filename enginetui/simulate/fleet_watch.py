"""A simulated fleet on screen: `enginetui simulate --watch` with replicas, and `enginetui replay` of a fleet's
recording. One row per replica (its role, step, running and waiting requests, KV use, requests routed to it
and done, prefix-cache hit rate), the fleet's totals, and the router's latest choices with its reasons. Both
fold the fleet's step events (each tagged with its replica: fleet_events.py), live or from the file.
"""

import struct
from collections import deque
from dataclasses import dataclass

import msgspec
from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import Footer, Static

from enginetui import keys
from enginetui.core.engine.events import StepEvent
from enginetui.dashboard.widgets.help_screen import HelpScreen
from enginetui.plural import count
from enginetui.replay.controls import MAX_IDLE_S, JumpScreen, Playback, offsets_for_play, playback_keys

CHOICES_KEPT = 200  # latest routing choices kept for the table
TITLE_STYLE = "bold #c678dd"
FLEET_PANELS = [  # the help screen's line per panel
    ("title", "the fleet (replicas, pools, router), the simulated time and the pace; `finished` after the last step"),
    (
        "replicas",
        "a row per replica: role, step, running and waiting requests, KV use, requests routed to it and done, "
        "prefix-cache hit rate; then the fleet's totals",
    ),
    ("router", "its latest choices, newest first: when, the request, the replica it went to, and why"),
]
JUMP_FORMS = "a time into the run (12.5s) or an event (e40)"  # where a fleet's replay jumps to (parse_at)
LIVE_REFUSAL = "a live simulation plays at --speed: record it (--record FILE) to pause, step and seek it in a replay"


@dataclass(slots=True)
class ReplicaView:
    """One replica as its latest event left it."""

    role: str  # "replica", "prefill" or "decode"
    runs_on: str = ""  # a mixed fleet's: its hardware or fit
    step: int = 0  # its latest step
    running: int = 0  # requests running after it
    waiting: int = 0  # requests waiting after it
    kv_used: float = 0.0  # share of its KV pool in use
    routed: int = 0  # requests it took in
    done: int = 0  # requests it finished
    queries: int = 0  # prompt tokens looked up in its prefix cache
    hits: int = 0  # of which found there


@dataclass(frozen=True, slots=True)
class Choice:
    """One routing choice, as the replica took the request in."""

    time: float  # simulated seconds the request reached the replica
    req_id: str  # the request
    replica: int  # where it went
    why: str  # the router's reason


class FleetState:
    """The fleet's replicas and the router's choices, folded from tagged step events."""

    def __init__(self, roles: list[str], models: list[str] | None = None) -> None:
        self.roles = roles  # per replica its role
        self.models = models or []  # a mixed fleet's: per replica what it runs on
        self.replicas = [ReplicaView(role, model) for role, model in zip(roles, self.models or [""] * len(roles))]
        self.choices: deque[Choice] = deque(maxlen=CHOICES_KEPT)  # oldest first
        self.time = 0.0  # the latest event's simulated time
        self.num_events = 0  # events folded

    def apply(self, event: StepEvent) -> None:
        r = self.replicas[event.replica]
        r.step = event.step
        r.running = len(event.running)
        r.waiting = len(event.waiting)
        r.kv_used = 1 - event.num_free_blocks / max(event.num_blocks, 1)
        r.done += len(event.finished) + len(event.rejected)
        r.queries, r.hits = event.prefix_cache_queries, event.prefix_cache_hits
        r.routed += len(event.added)
        for added in event.added:
            self.choices.append(Choice(added.arrival_time, added.req_id, event.replica, added.routed))
        self.time = max(self.time, event.time)
        self.num_events += 1


def _hit(hits: int, queries: int) -> str:
    return f"{hits / queries:.1%}" if queries else "-"


def replicas_table(state: FleetState) -> Table:
    """One row per replica, then the fleet's totals."""
    pools = set(state.roles) != {"replica"}
    mixed = bool(state.models)
    table = Table(expand=True, box=None, header_style="bold", pad_edge=False)
    table.add_column("replica")
    if pools:
        table.add_column("pool")
    if mixed:
        table.add_column("runs on")
    for name in ("step", "running", "waiting", "KV use", "routed", "done", "prefix hit"):
        table.add_column(name, justify="right")
    for k, r in enumerate(state.replicas):
        cells = [str(k), *([r.role] if pools else []), *([r.runs_on] if mixed else [])]
        cells += [str(r.step), str(r.running), str(r.waiting), f"{r.kv_used:.0%}", str(r.routed), str(r.done)]
        table.add_row(*cells, _hit(r.hits, r.queries))
    reps = state.replicas
    kv = sum(r.kv_used for r in reps) / len(reps) if reps else 0.0
    table.add_row(
        Text("fleet", style="bold"),
        *([""] if pools else []),
        *([""] if mixed else []),
        str(sum(r.step for r in reps)),
        str(sum(r.running for r in reps)),
        str(sum(r.waiting for r in reps)),
        f"{kv:.0%} mean",
        str(sum(r.routed for r in reps)),
        str(sum(r.done for r in reps)),
        _hit(sum(r.hits for r in reps), sum(r.queries for r in reps)),
        style="bold",
    )
    return table


def choices_table(state: FleetState, rows: int) -> Table:
    """The router's latest `rows` choices, newest first."""
    table = Table(expand=True, box=None, header_style="bold", pad_edge=False)
    table.add_column("s", justify="right", width=9)
    table.add_column("request", width=14, no_wrap=True)
    table.add_column("→", justify="right", width=3)
    table.add_column("why", ratio=1, no_wrap=True, overflow="ellipsis")
    for c in list(state.choices)[-rows:][::-1]:
        table.add_row(f"{c.time:.3f}", c.req_id, str(c.replica), c.why)
    return table


class FleetView(App):
    """The fleet's screen: title, replicas, router choices."""

    ENABLE_COMMAND_PALETTE = False  # ^p plays, as in every replay

    CSS = """
    #fleet-title { height: 1; background: $panel; }
    #replicas { height: auto; border: round $accent; padding: 0 1; }
    #choices { height: 1fr; border: round $accent; padding: 0 1; }
    """

    def __init__(self, roles: list[str], router: str, models: list[str] | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.state = FleetState(roles, models)  # what is shown
        self.router = router  # the router in words
        self._drawn: object = None  # _draw_key() when last drawn

    def compose(self) -> ComposeResult:
        yield Static(id="fleet-title")
        yield Static(id="replicas")
        yield Static(id="choices")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#replicas", Static).border_title = "replicas"
        self.query_one("#choices", Static).border_title = "router: latest choices (request → replica, why)"
        self.redraw()

    def fleet_words(self) -> str:
        roles = self.state.roles
        if "prefill" in roles:
            return f"{roles.count('prefill')} prefill + {roles.count('decode')} decode replicas behind {self.router}"
        return f"{count(len(roles), 'replica')} behind {self.router}"

    def title_text(self) -> Text:
        raise NotImplementedError

    def _draw_key(self) -> object:
        """What the screen shows changes with this."""
        return self.state.num_events

    def redraw(self) -> None:
        """Draw what changed since the last time."""
        if self._draw_key() != self._drawn:
            self.draw()

    def draw(self) -> None:
        self._drawn = self._draw_key()
        self.query_one("#fleet-title", Static).update(self.title_text())
        self.query_one("#replicas", Static).update(replicas_table(self.state))
        choices = self.query_one("#choices", Static)
        rows = max(1, choices.content_size.height - 1) if choices.content_size.height else 10
        choices.update(choices_table(self.state, rows))

    def on_resize(self) -> None:
        self.call_after_refresh(self.draw)

    def about(self) -> list[tuple[str, str]]:
        """The help screen's rows about the fleet."""
        return [
            ("fleet", self.fleet_words()),
            ("events", f"{self.state.num_events} folded, to {self.state.time:.3f} s"),
        ]

    def action_help(self) -> None:
        """Open the help screen (the dashboard's), or close it if it is open."""
        if isinstance(self.screen, HelpScreen):
            self.screen.action_close()
            return
        rows = keys.key_rows(self, self.BINDINGS)
        self.push_screen(HelpScreen(rows, FLEET_PANELS, self.about(), prompt_keys=False, about_title="fleet"))


class FleetWatchTUI(FleetView):
    """`enginetui simulate --watch` for a fleet: follows the simulation (watch.SimulatedEngine paces it)."""

    BINDINGS = [
        keys.refused_keys(f"{keys.CONTROLS},{keys.PLAIN_PLAYBACK}", f"play, pause, step and speed: {LIVE_REFUSAL}"),
        keys.help_key(plain=True),
        *keys.quit_keys("stop the simulation and quit", plain=True),
    ]

    def __init__(self, engine, roles: list[str], router: str, models: list[str] | None = None, **kwargs) -> None:
        super().__init__(roles, router, models, **kwargs)
        self.sim = engine  # watch.SimulatedEngine: the run's events, paced

    def on_mount(self) -> None:
        super().on_mount()
        self.run_worker(self._follow(), exclusive=True)
        self.set_interval(0.1, self.redraw)

    async def _follow(self) -> None:
        try:
            self.state.apply(await self.sim.snapshot())
            async for event in self.sim.events():  # after the last, it waits until the app quits
                self.state.apply(event)
        except RuntimeError as exc:  # the simulation failed
            self.notify(str(exc), severity="error", timeout=30)

    def _draw_key(self) -> object:
        return (self.state.num_events, self.sim.finished)

    def action_refused(self) -> None:
        self.notify(LIVE_REFUSAL, severity="warning")

    def title_text(self) -> Text:
        sim = self.sim
        text = Text("enginetui ", style="bold")
        text.append("◆ simulated fleet", style=TITLE_STYLE)
        text.append(f" · {self.fleet_words()}")
        text.append(f" · {self.state.time:.2f} s simulated")
        text.append(f" · {sim.speed:g}x" if sim.speed > 0 else " · as fast as drawn", style="bold #61afef")
        if sim.finished:
            text.append(" · finished", style="bold #98c379")
        return text

    def on_unmount(self) -> None:
        self.sim.shutdown()


class FleetReplayTUI(Playback, FleetView):
    """`enginetui replay` of a fleet's recording: one event at a time, or played."""

    BINDINGS = [
        *playback_keys("move", "Next", "the next event", "the previous event", JUMP_FORMS),
        keys.help_key(plain=True),
        *keys.quit_keys("quit", plain=True),
    ]

    def __init__(self, recording, start: int = 0, keep_idle: bool = False, **kwargs) -> None:
        roles, models = list(recording.header.replicas), list(recording.header.replica_models)
        super().__init__(roles, _router_of(recording), models, **kwargs)
        self.recording = recording  # core.record.reader.Recording
        self.index = -1  # the event shown
        self.opens_at = start  # the event to open at
        self.play_offsets = offsets_for_play(
            [h.time for h in recording.heads], max_idle_s=None if keep_idle else MAX_IDLE_S
        )

    def on_mount(self) -> None:
        super().on_mount()
        self.show_event(min(self.opens_at, len(self.recording) - 1))

    def show_event(self, index: int) -> None:
        if index < self.index:
            self.state = FleetState(self.state.roles, self.state.models)
            self.index = -1
        while self.index < index:
            self.index += 1
            self.state.apply(self.recording.event(self.index))
        self.redraw()

    def action_move(self, delta: int) -> None:
        self.stop_playing()
        target = self.index + delta
        if 0 <= target < len(self.recording):
            self.show_event(target)
        else:
            self._at_an_end(delta)

    def action_move_to(self, index: int) -> None:
        self.stop_playing()
        self.show_event(index if index >= 0 else len(self.recording) - 1)

    def action_jump(self) -> None:
        self.stop_playing()

        def jump(text: str | None) -> None:
            if not text:
                return
            try:
                self.show_event(parse_at(text, self.recording))
            except ValueError:
                self.notify(f"{text.strip()!r} is not {JUMP_FORMS}", severity="error")

        self.push_screen(JumpScreen(JUMP_FORMS, "12.5s or e40"), jump)

    def _at_an_end(self, delta: int) -> None:
        where = "end" if delta > 0 else "start"
        self.notify(f"{where} of the recording: event {self.index + 1} of {len(self.recording)}", severity="warning")

    @property
    def play_position(self) -> int:
        return self.index

    @property
    def play_last(self) -> int:
        return len(self.recording) - 1

    def play_show(self, position: int) -> None:
        self.show_event(position)

    def _draw_key(self) -> object:
        return (self.index, self.playing, self.speed)

    def title_text(self) -> Text:
        text = Text("enginetui ", style="bold")
        text.append("◆ replay of a simulated fleet", style=TITLE_STYLE)
        text.append(f" · {self.fleet_words()}")
        text.append(f" · event {self.index + 1} of {len(self.recording)} · {self.state.time:.2f} s simulated")
        text.append(f" · playing {self.speed:g}x" if self.playing else " · paused", style="bold #61afef")
        return text


def _router_of(recording) -> str:
    """The router, as its reasons name it (`cache-aware: matched ...`), from the first event that added one."""
    names: list[str] = []
    for i in range(min(len(recording), 400)):
        for added in recording.event(i).added:
            name = added.routed.partition(":")[0]
            if name and name not in names:
                names.append(name)
    return " / ".join(names) or "its router"


def is_fleet_recording(path: str) -> bool:
    """Whether the file is a recording of a simulated fleet (its header lists replicas); reads the header alone."""
    from enginetui.core.record import format as fmt

    try:
        with open(path, "rb") as f:
            start = f.read(fmt.PREAMBLE.size + fmt.FRAME_HEAD.size)
            if len(start) < fmt.PREAMBLE.size + fmt.FRAME_HEAD.size or not start.startswith(fmt.MAGIC):
                return False
            length, _, kind = fmt.FRAME_HEAD.unpack_from(start, fmt.PREAMBLE.size)
            if kind != fmt.HEADER or length > fmt.MAX_FRAME_BYTES:
                return False
            return bool(fmt.decode_header(f.read(length)).replicas)
    except (OSError, ValueError, struct.error, msgspec.MsgspecError):
        return False


def parse_at(text: str, recording) -> int:
    """`--at` in a fleet's replay: an event (e40) or a time into the run (12.5s) -> the event's index."""
    text = text.strip()
    try:
        if text.startswith("e"):
            return min(max(int(text[1:]) - 1, 0), len(recording) - 1)
        if text.endswith("s"):
            t0, at = recording.heads[0].time, float(text[:-1])
            return next((i for i, h in enumerate(recording.heads) if h.time - t0 >= at), len(recording) - 1)
    except ValueError:
        pass
    raise ValueError(f"--at {text!r}: a fleet's replay opens at an event (e40) or a time into the run (12.5s)")


def run_fleet_replay(path: str, at: str | None, keep_idle: bool = False) -> int:
    """`enginetui replay FILE` of a fleet's recording."""
    import sys

    from enginetui.core.record.format import RecordingError
    from enginetui.core.record.reader import read_recording
    from enginetui.terminal_check import REPLAY_INSTEAD, refuse_without_terminal

    try:
        recording = read_recording(path)
        if not len(recording):
            raise OSError(f"{path} holds no events")
        start = parse_at(at, recording) if at else 0
    except (OSError, RecordingError, ValueError) as exc:
        print(f"enginetui replay: {exc}", file=sys.stderr)
        return 2
    if refuse_without_terminal("enginetui replay", REPLAY_INSTEAD):
        return 2
    for note in recording.describe_problems():
        print(f"enginetui replay: {note}", file=sys.stderr)
    app = FleetReplayTUI(recording, start=start, keep_idle=keep_idle)
    app.run()
    return app.return_code or 0
