"""What both replays share (the engine's, `enginetui/replay/app.py`, and the vLLM watch's,
`enginetui/vllm_watch/replay.py`): play speeds, the playback clock that shortens idle stretches,
and the screen that asks where to jump. Light: no engine, no torch."""

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label

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
