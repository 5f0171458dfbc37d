"""Queues panel: the running and waiting queues in scheduler order, head first."""

from collections.abc import Mapping

from rich.text import Text
from textual.widget import Widget

from enginetui.core.engine.events import RequestProgress, StepEvent
from enginetui.dashboard.widgets.palette import DIM, STATUS_STYLES

LABEL_WIDTH = 13  # "running 12/256": longer labels still get one space


def queue_line(label: str, reqs: list[RequestProgress], colors: Mapping[str, str], width: int) -> Text:
    """`label id id id … +N`: as many ids as fit in `width`, then how many more."""
    line = Text(label.ljust(LABEL_WIDTH - 1) + " ", style="bold")
    if not reqs:
        return line.append("(empty)", style=DIM)
    for i, req in enumerate(reqs):
        mark = "(preempted)" if req.status == "preempted" else ""
        rest = len(reqs) - i - 1
        if len(line) + len(req.req_id) + len(mark) + (len(f" +{rest}") if rest else 0) > width:
            return line.append(f"+{rest + 1}", style=DIM)
        line.append(req.req_id, style=f"bold {colors.get(req.req_id, '')}")
        line.append(mark, style=STATUS_STYLES["preempted"])
        if rest:
            line.append(" ")
    return line


class QueuesPanel(Widget):
    """Who runs and who waits."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._event: StepEvent | None = None  # latest step event
        self._colors: Mapping[str, str] = {}  # req_id -> colour
        self.border_title = "Queues · scheduler order"

    def show(self, event: StepEvent | None, colors: Mapping[str, str]) -> None:
        self._event, self._colors = event, colors
        self.refresh()

    def render(self) -> Text:
        e = self._event
        if e is None:
            return Text("")
        width = self.content_size.width
        running = queue_line(f"running {len(e.running)}/{e.max_num_seqs}", e.running, self._colors, width)
        waiting = queue_line(f"waiting {len(e.waiting)}", e.waiting, self._colors, width)
        return running.append("\n").append_text(waiting)
