"""Sparklines of the engine over time: tok/s, KV usage %, running and waiting counts."""

from collections.abc import Sequence
from copy import deepcopy

from rich.text import Text
from textual.widget import Widget

from enginetui.dashboard.state import History
from enginetui.dashboard.widgets.palette import DIM

BARS = "▁▂▃▄▅▆▇█"
LABEL_WIDTH = 8  # "running "
VALUE_WIDTH = 7  # " 1234.5"


def sparkline(values: Sequence[float], width: int, top: float | None = None) -> str:
    """The last `width` values as bars scaled to `top` (default: their maximum)."""
    shown = list(values)[-width:] if width > 0 else []
    peak = top if top is not None else max(shown, default=0.0)
    if peak <= 0:
        return BARS[0] * len(shown)
    return "".join(BARS[min(len(BARS) - 1, round(v / peak * (len(BARS) - 1)))] for v in shown)


class Sparklines(Widget):
    """Four labelled series, newest on the right."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._history = History()  # the series
        self.border_title = "Over time"

    def show(self, history: History) -> None:
        self._history = deepcopy(history)  # this moment's series: a repaint before the next show draws them too
        self.refresh()

    def render(self) -> Text:
        width = self.content_size.width - LABEL_WIDTH - VALUE_WIDTH
        h = self._history
        rows = (
            ("tok/s", h.tok_s, None, "#98c379", "{:.1f}"),
            ("KV %", h.kv_pct, 100.0, "#61afef", "{:.0f}%"),
            ("running", h.running, None, "#e5c07b", "{:.0f}"),
            ("waiting", h.waiting, None, "#d19a66", "{:.0f}"),
        )
        text = Text(no_wrap=True)
        for i, (label, series, top, style, fmt) in enumerate(rows):
            if i:
                text.append("\n")
            text.append(label.ljust(LABEL_WIDTH), style="bold")
            line = sparkline(series, width, top)
            text.append(line.ljust(max(0, width)), style=style)
            value = fmt.format(series[-1]) if series else "—"
            text.append(value.rjust(VALUE_WIDTH), style="" if series else DIM)
        return text
