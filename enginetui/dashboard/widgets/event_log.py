"""Event log: admissions, chunked-prefill splits, preemptions, finishes and rejections, newest last."""

from collections.abc import Sequence

from rich.text import Text
from textual.widget import Widget

from enginetui.dashboard.state import LogLine
from enginetui.dashboard.widgets.palette import DIM, LOG_STYLES
from enginetui.plural import count

KIND_WIDTH = 7  # "preempt"


def log_line(line: LogLine) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f"{line.step:>5} ", style=DIM)
    text.append(line.kind.ljust(KIND_WIDTH + 1), style=LOG_STYLES[line.kind])
    return text.append(line.text)


class EventLog(Widget):
    """The newest log lines that fit."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._lines: Sequence[LogLine] = ()  # the whole log, oldest first
        self.border_title = "Event log"

    def show(self, lines: Sequence[LogLine], preemptions: int = 0) -> None:
        """The log (copied: a repaint before the next show draws this moment too), and the engine's
        preemption count so far (in the title: they scroll by fast)."""
        self._lines = tuple(lines)
        self.border_title = f"Event log · {count(preemptions, 'preemption')} so far" if preemptions else "Event log"
        self.refresh()

    def render(self) -> Text:
        height = self.content_size.height
        if not self._lines:
            return Text("nothing yet", style=DIM)
        shown = list(self._lines)[-height:] if height else []
        return Text("\n", no_wrap=True, overflow="ellipsis").join(log_line(line) for line in shown)
