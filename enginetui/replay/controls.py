"""What the replays share (one engine's, `enginetui/replay/app.py`, and a simulated fleet's,
`enginetui/simulate/fleet_watch.py`): play speeds, the playback clock that shortens idle stretches,
playing and pausing along it, and the screen that asks where to jump. Light: no engine, no torch."""

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.timer import Timer
from textual.widgets import Input, Label

from enginetui import keys

if TYPE_CHECKING:
    _AppBase = App  # type-checked as the App it is mixed into
else:
    _AppBase = object

SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)  # play speeds the - and + keys step through
MAX_IDLE_S = 2.0  # an idle stretch plays as this long at most, at 1x (unless --keep-idle)
PLAY_HZ = 30.0  # how often playback moves on


def offsets_for_play(
    times: list[float], idle: list[bool] | None = None, max_idle_s: float | None = MAX_IDLE_S
) -> list[float]:
    """Per item: seconds from the first one as playback counts them. `idle[i]`: nothing happens
    between item i and the next; a run of such gaps plays as `max_idle_s` at most (None: as
    recorded). Without `idle`, every gap is a stretch of its own (an engine's events come only
    when it works, so a long gap is an idle engine)."""
    offsets, total, stretch = [0.0], 0.0, 0.0
    for i, (a, b) in enumerate(zip(times, times[1:])):
        gap = max(0.0, b - a)
        if max_idle_s is None or (idle is not None and not idle[i]):
            stretch = 0.0
            total += gap
        else:
            if idle is None:
                stretch = 0.0
            total += min(gap, max(0.0, max_idle_s - stretch))
            stretch += gap
        offsets.append(total)
    return offsets


def playback_keys(
    move: str, name: str, forward: str, back: str, jump: str, between: Sequence[Binding] = ()
) -> list[Binding]:
    """A replay's keys, in its footer's order: play, → and ← (the action `move`(1) and (-1), shown as
    `name`, `forward` and `back` saying what they move to), `between` (a replay's own hidden keys), the
    ends, slower, faster, and g jumping to `jump` (a place, in words)."""
    return [
        Binding("space,ctrl+p", "play", "Play", tooltip="play the recording from here, or pause it (or ^p)"),
        Binding("right,ctrl+s", f"{move}(1)", name, key_display="→", tooltip=f"{forward} (or ^s)"),
        Binding("left", f"{move}(-1)", "Back", key_display="←", tooltip=back),
        *between,
        Binding("home", "move_to(0)", "Start", show=False, tooltip="the start of the recording"),
        Binding("end", "move_to(-1)", "End", show=False, tooltip="the end of the recording"),
        Binding(
            f"minus,{keys.SLOWER}",
            "speed(-1)",
            "Slower",
            key_display="-",
            tooltip=f"play slower (down to {SPEEDS[0]:g}x; or PgDn)",
        ),
        Binding(
            f"plus,equals_sign,{keys.FASTER}",
            "speed(1)",
            "Faster",
            key_display="+",
            tooltip=f"play faster (up to {SPEEDS[-1]:g}x; or PgUp)",
        ),
        Binding("g", "jump", "Jump", tooltip=f"jump to {jump}"),
    ]


class JumpScreen(ModalScreen[str | None]):
    """Asks where to jump (`what`: the forms a target takes, in words)."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]
    AUTO_FOCUS = "#jump-input"  # type at once (the app's own AUTO_FOCUS is none)
    DEFAULT_CSS = """
    JumpScreen { align: center middle; }
    #jump { width: 80; max-width: 95%; height: auto; border: round $accent; background: $panel; padding: 0 1; }
    """

    def __init__(
        self,
        what: str = "a step (123), a time into the recording (12.5s) or an event (e40)",
        placeholder: str = "step, 12.5s or e40",
    ) -> None:
        super().__init__()
        self.what = what
        self.placeholder = placeholder

    def compose(self) -> ComposeResult:
        with Vertical(id="jump"):
            yield Label(f"jump to: {self.what}")
            yield Input(placeholder=f"{self.placeholder} · Enter jumps · Esc cancels", id="jump-input")

    def on_input_submitted(self, message: Input.Submitted) -> None:
        self.dismiss(message.value)


class Playback(_AppBase):
    """Play, pause and speed, mixed into a replay app. The app says where it is (`play_position`, from 0
    to `play_last`), the playback clock at each position (`play_offsets`), how to show a position
    (`play_show`) and what to say at either end (`_at_an_end`); this moves the position on by that clock."""

    speed = 1.0  # play speed (recorded seconds per second)
    playing = False  # playback moving on by itself
    _play_from: tuple[float, float] | None = None  # (time.monotonic(), play offset) when play (re)started
    _play_timer: Timer | None = None  # moves playback on while playing
    play_offsets: list[float]  # the playback clock (seconds) at each position

    if TYPE_CHECKING:  # what the app provides

        @property
        def play_position(self) -> int: ...

        @property
        def play_last(self) -> int: ...

        def play_show(self, position: int) -> None: ...

        def _at_an_end(self, delta: int) -> None: ...

        def redraw(self) -> None: ...

    def action_play(self) -> None:
        if self.playing:
            self.stop_playing()
            return
        if self.play_position >= self.play_last:
            self._at_an_end(1)
            return
        self.playing = True
        self._play_from = (time.monotonic(), self.play_offsets[self.play_position])
        self._play_timer = self.set_interval(1 / PLAY_HZ, self._play_tick)
        self.redraw()

    def stop_playing(self) -> None:
        if self._play_timer is not None:
            self._play_timer.stop()
            self._play_timer = None
        if self.playing:
            self.playing = False
            self.redraw()

    def _play_tick(self) -> None:
        started, offset = self._play_from or (time.monotonic(), 0.0)
        clock = offset + (time.monotonic() - started) * self.speed
        position = self.play_position
        while position < self.play_last and self.play_offsets[position + 1] <= clock:
            position += 1
        if position != self.play_position:
            self.play_show(position)
        if position >= self.play_last:
            self.stop_playing()
            self._at_an_end(1)

    def action_speed(self, direction: int) -> None:
        at = SPEEDS.index(self.speed)
        if not 0 <= at + direction < len(SPEEDS):
            self.notify(f"already the {'fastest' if direction > 0 else 'slowest'}: {self.speed:g}x", severity="warning")
            return
        if self.playing:  # keep the clock continuous across the change
            self._play_from = (time.monotonic(), self.play_offsets[self.play_position])
        self.speed = SPEEDS[at + direction]
        self.redraw()
