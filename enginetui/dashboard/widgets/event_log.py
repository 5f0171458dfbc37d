"""Event log: admissions, chunked-prefill splits, preemptions, finishes and rejections, newest last."""

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text
from textual.widget import Widget

from enginetui.dashboard.widgets.palette import DIM, LOG_STYLES
from enginetui.plural import count

if TYPE_CHECKING:  # the vLLM watch draws its log with log_rows and loads no engine state
    from enginetui.dashboard.state import LogLine

KIND_WIDTH = 7  # "preempt"
MIN_HANGING = 20  # narrowest text column worth indenting under; narrower, wrapped lines start at the left edge
_CONSOLE = Console(width=120)  # Text.wrap needs one; unjustified wrapping never uses it


def log_head(line: "LogLine") -> Text:
    """The step and kind columns a log line starts with."""
    text = Text()
    text.append(f"{line.step:>5} ", style=DIM)
    return text.append(line.kind.ljust(KIND_WIDTH + 1), style=LOG_STYLES.get(line.kind, ""))  # vLLM's own: plain


def log_rows(rows: Sequence[tuple[Text, str]], width: int, height: int) -> Text:
    """The newest rows (head, text) that fit in `height` lines of `width` cells, oldest first; a long
    text wraps at word boundaries under its own first column, so each is read in full. An older row
    with too little room left above shows its start, ending in an ellipsis."""
    shown: list[Text] = []
    for head, body in reversed(rows):
        lines = wrapped(head, body, width)
        room = height - len(shown)
        if len(lines) > room:
            if room > 0:
                last = lines[room - 1]
                last.rstrip()
                last.truncate(max(0, width - 1))
                shown[:0] = [*lines[: room - 1], last.append("…", style=DIM)]
            break
        shown[:0] = lines
    return Text("\n", no_wrap=True).join(shown)


def wrapped(head: Text, body: str, width: int) -> list[Text]:
    """`head` then `body`, wrapped to `width` cells: continued lines indented by the head's width
    where that leaves MIN_HANGING cells, else from the left edge."""
    indent = head.cell_len if width - head.cell_len >= MIN_HANGING else 0
    if not indent:
        whole = head.copy().append(body)
        return list(whole.wrap(_CONSOLE, max(1, width), overflow="fold"))
    lines = list(Text(body).wrap(_CONSOLE, width - indent, overflow="fold")) or [Text()]
    return [head.copy().append_text(lines[0]), *(Text(" " * indent).append_text(line) for line in lines[1:])]


class EventLog(Widget):
    """The newest log lines that fit, each in full."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._lines: Sequence[LogLine] = ()  # the whole log, oldest first
        self.border_title = "Event log"

    def show(self, lines: Sequence["LogLine"], preemptions: int = 0) -> None:
        """The log (copied: a repaint before the next show draws this moment too), and the engine's
        preemption count so far (in the title: they scroll by fast)."""
        self._lines = tuple(lines)
        self.border_title = f"Event log · {count(preemptions, 'preemption')} so far" if preemptions else "Event log"
        self.refresh()

    def render(self) -> Text:
        if not self._lines:
            return Text("nothing yet", style=DIM)
        size = self.content_size
        newest = self._lines[-size.height :] if size.height else ()  # a row takes a line at least
        return log_rows([(log_head(line), line.text) for line in newest], size.width, size.height)
