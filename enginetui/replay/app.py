"""`enginetui replay FILE`: the dashboard on a recording, moved through by hand or played.

The same app and panels as live (EngineTUI); instead of following an engine, the state shown is
the replay session's state after one event of the recording. Keys: ← → a step, , . an event,
Home / End the ends, space plays (at 0.25x-8x, - and +), g jumps to a step or a time. Sending
prompts, aborting and the other engine keys say that a recording cannot be changed.
"""

from dataclasses import dataclass

from rich.text import Text
from textual.binding import Binding
from textual.widgets import Footer, Static

from enginetui import keys
from enginetui.dashboard.app import PANELS, EngineTUI
from enginetui.dashboard.widgets.palette import DIM
from enginetui.dashboard.widgets.timeline import TimelinePanel
from enginetui.replay.controls import MAX_IDLE_S, JumpScreen, Playback, offsets_for_play, playback_keys
from enginetui.replay.engine import RecordedEngine
from enginetui.replay.session import ReplaySession

# What each panel shows: the live dashboard's panels (no process, no prompt box), then the replay bar.
REPLAY_PANELS = [
    ("title bar", "the recorded engine's step counter and model (the replay bar says where the replay is)"),
    *((name, what) for name, what in PANELS if name not in ("title bar", "process")),
    ("replay bar", "playing or paused, the event shown (its kind), its step and time, the play speed"),
]


@dataclass(frozen=True, slots=True)
class Target:
    """Where a typed jump goes: an event index, or why it cannot."""

    index: int | None  # the event to show (None: not found)
    error: str = ""  # why not, in words


def parse_target(text: str, session: ReplaySession) -> Target:
    """`123` is engine step 123, `12.5s` is 12.5 seconds into the recording, `e40` is event 40."""
    text = text.strip().lower()
    first, last = session.steps
    try:
        if text.endswith("s"):
            return Target(session.index_at(float(text[:-1])))
        if text.startswith("e"):
            number = int(text[1:])
            if not 1 <= number <= len(session):
                return Target(None, f"no event {number}: the recording has events 1–{len(session)}")
            return Target(number - 1)
        step = int(text)
    except ValueError:
        return Target(None, f"{text!r} is not a step (123), a time (12.5s) or an event (e40)")
    index = session.index_of_step(step)
    if index is None:
        return Target(None, f"no step {step} in this recording (steps {first}–{last})")
    return Target(index)


class ReplayBar(Static):
    """Where the replay is: playing or paused, event, step and time, speed."""

    DEFAULT_CSS = (
        "ReplayBar { height: 1; padding: 0 1; background: $boost; text-wrap: nowrap; text-overflow: ellipsis; }"
    )

    def show(self, playing: bool, index: int, session: ReplaySession, speed: float) -> None:
        first, last = session.steps
        head = session.recording.heads[index]
        text = Text("▶ playing" if playing else "⏸ replay", style="bold #98c379" if playing else "bold #e5c07b")
        text.append(f" · event {index + 1}/{len(session)} ({head.kind}) · step {head.step} of {first}–{last}")
        text.append(f" · {session.seconds_at(index):.2f} s of {session.seconds_at(len(session) - 1):.2f} s")
        text.append(f" · {speed:g}x")
        hint = "  ← → step · , . event · space play · - + speed · g jump"
        if len(text) + len(hint) <= self.content_size.width:  # said where there is room (the footer names most)
            text.append(hint, style=DIM)
        self.update(text)


class ReplayTUI(Playback, EngineTUI, inherit_bindings=False):
    """The dashboard on a recording."""

    BINDINGS = [
        *playback_keys(
            "move_step",
            "Step",
            "the next engine step",
            "the previous engine step",
            "a step (123), a time (12.5s) or an event (e40)",
            between=[
                Binding(
                    "full_stop",
                    "move_event(1)",
                    "Event",
                    show=False,
                    tooltip="the next event (a step, or a change between steps: adds, aborts, pauses)",
                ),
                Binding("comma", "move_event(-1)", "Event", show=False, tooltip="the previous event"),
            ],
        ),
        keys.timeline_key(plain=True),
        *keys.select_keys(),
        keys.refused_keys(
            "ctrl+b,ctrl+x,ctrl+l", "bursts, aborts and clearing: not in a replay (it shows what happened)"
        ),
        keys.help_key(plain=True),
        *keys.quit_keys("quit", plain=True),
    ]
    AUTO_FOCUS = None  # no prompt box: a replay takes no text, only keys

    def __init__(
        self,
        session: ReplaySession,
        *,
        notes: list[str] | tuple[str, ...] = (),
        start: int = 0,
        redraw_hz: float = 15.0,
        keep_idle: bool = False,
        **kwargs,
    ) -> None:
        super().__init__(
            RecordedEngine(session.recording.header, session.tokenizer),
            redraw_hz=redraw_hz,
            history_interval=session.history_interval,
            **kwargs,
        )
        self.session = session  # the recording and its states
        self.file_notes = list(notes)  # what to say about the recording when it opens (cut short, events lost)
        self.index = start  # the event shown
        # playback clock per event: a long gap (an idle engine) plays as MAX_IDLE_S unless keep_idle
        self.play_offsets = offsets_for_play(session.times, max_idle_s=None if keep_idle else MAX_IDLE_S)

    def on_mount(self) -> None:
        self.take_no_input()  # nothing can be sent to a recording, no process runs (the help screen names it)
        timeline = self.query_one(TimelinePanel)
        timeline.display = True  # the whole story is what a replay is for
        self.mount(ReplayBar(id="replay-bar"), before=self.query_one(Footer))
        super().on_mount()

    # ---- showing one event ---------------------------------------------------------------

    def _connect(self) -> None:  # type: ignore[override]  # the live dashboard's is a worker; a replay opens at once
        """Open at the first event, say what is wrong with the file if anything."""
        self.phase = "ready"
        self.show_event(self.index)
        for note in self.file_notes:
            self.notify(note, title="recording", severity="warning", timeout=15)

    def show_event(self, index: int) -> None:
        """Show the state after event `index` (clamped to the recording)."""
        self.index = max(0, min(len(self.session) - 1, index))
        self.state = self.session.state_at(self.index)
        self._drawn = None  # a different state object: draw it whatever its version says
        self.redraw()

    def redraw(self) -> None:
        super().redraw()
        for bar in self.query(ReplayBar):
            bar.show(self.playing, self.index, self.session, self.speed)

    def _sample_process(self) -> None:
        """No process to read."""

    def _sample_idle_time(self) -> None:
        """The recording's own event times place its idle points (ReplaySession folds them in)."""

    def _title_phase(self) -> str:
        return "replay"  # the replay bar says whether it plays

    def _empty_hint(self) -> str:
        return "no requests at this point of the recording"

    # ---- moving --------------------------------------------------------------------------

    def action_move_step(self, delta: int) -> None:
        target = self.session.next_step(self.index) if delta > 0 else self.session.previous_step(self.index)
        self._move(target, delta)

    def action_move_event(self, delta: int) -> None:
        target = self.index + delta
        self._move(target if 0 <= target < len(self.session) else None, delta)

    def action_move_to(self, index: int) -> None:
        self.stop_playing()
        self.show_event(index if index >= 0 else len(self.session) - 1)

    def _move(self, target: int | None, delta: int) -> None:
        self.stop_playing()
        if target is None:
            self._at_an_end(delta)
        else:
            self.show_event(target)

    def _at_an_end(self, delta: int) -> None:
        step = self.session.recording.heads[self.index].step
        if delta > 0:
            self.notify(
                f"end of the recording: event {self.index + 1} of {len(self.session)}, step {step} "
                "(Home goes back to the start)",
                severity="warning",
            )
        else:
            self.notify(f"start of the recording: event {self.index + 1}, step {step}", severity="warning")

    def action_jump(self) -> None:
        self.stop_playing()

        def jump(text: str | None) -> None:
            if not text:
                return
            target = parse_target(text, self.session)
            if target.index is None:
                self.notify(target.error, severity="error")
            else:
                self.show_event(target.index)

        self.push_screen(JumpScreen(), jump)

    # ---- playing (Playback) -------------------------------------------------------------

    @property
    def play_position(self) -> int:
        return self.index

    @property
    def play_last(self) -> int:
        return len(self.session) - 1

    def play_show(self, position: int) -> None:
        self.show_event(position)

    # ---- what a recording cannot do ------------------------------------------------------

    def about(self) -> list[tuple[str, str]]:
        """The help screen's rows about the recording."""
        rec = self.session.recording
        header = rec.header
        first, last = self.session.steps
        rows = [
            ("file", rec.path),
            ("recorded by", f"{header.source} · enginetui {header.enginetui_version}"),
            (
                "engine",
                f"{header.engine.model_name} · {header.engine.device} · {header.engine.dtype} · "
                f"{header.engine.num_blocks} blocks × {header.engine.block_size} tok",
            ),
            ("holds", f"{len(rec)} events · steps {first}–{last} · {self.session.seconds_at(len(rec) - 1):.2f} s"),
            (
                "text",
                "decoded with the recorded tokenizer" if header.tokenizer else "none: the recording has no tokenizer",
            ),
        ]
        return rows + [("note", note) for note in self.file_notes]

    def key_rows(self) -> list[tuple[str, str]]:
        """Every binding (a replay takes no text: its keys are plain)."""
        return keys.key_rows(self, self.BINDINGS)

    def action_help(self) -> None:
        self.show_help(REPLAY_PANELS, self.about(), prompt_keys=False, about_title="recording")
