"""Requests list: one row per request with status word, progress and streaming text."""

from dataclasses import dataclass, replace

from rich.text import Text
from textual import events
from textual.message import Message
from textual.widget import Widget

from enginetui.dashboard.state import RequestView
from enginetui.dashboard.widgets.palette import DIM, STATUS_STYLES, request_color
from enginetui.keys import REQUEST_KEYS

STATUS_WIDTH = 9  # "PREEMPTED"
PROGRESS_WIDTH = 9  # "1234/5678"


def one_line(text: str) -> str:
    return text.replace("\r", "").replace("\n", "⏎")


def tail(text: str, width: int) -> str:
    """The end of `text` in `width` cells (what streams in is what you see)."""
    if len(text) <= width:
        return text
    return "…" + text[len(text) - width + 1 :] if width > 0 else ""


def progress(view: RequestView) -> str:
    """Computed / total tokens while live; the prompt's length in characters before the engine
    has listed (and tokenized) it; the tokens generated once it ended."""
    if view.status == "sent":
        return f"{len(view.prompt)} ch"
    if view.active:
        return f"{view.num_computed_tokens}/{view.num_tokens}"
    return f"{view.num_output_tokens} tok"


def first_row(selected: int, rows: int, height: int) -> int:
    """The first row shown: the newest rows stay in view (new requests appear there) unless the
    selection is above them, then it is the top row."""
    return max(0, min(selected, rows - height))


def row_note(view: RequestView, width: int) -> Text:
    """The free-text column: why it stopped or what it lost, then the end of its text so far."""
    if view.status in ("rejected", "error"):
        return Text(tail(one_line(view.detail or view.status), width), style=STATUS_STYLES[view.status])
    note = Text()
    if view.status == "preempted":
        note.append(f"(lost {view.lost_tokens} tok) ", style=STATUS_STYLES["preempted"])
    elif not view.active:
        note.append(f"{view.finish_reason} · ", style=DIM)
    room = max(0, width - len(note))
    if view.text:
        note.append(tail(one_line(view.text), room))
    else:
        note.append(tail(one_line(view.prompt), room), style=DIM)
    return note


class RequestsTable(Widget):
    """Every request, in order of submission; the selected one is marked ▶. A click selects a row."""

    @dataclass
    class Clicked(Message):
        """A row was clicked."""

        req_id: str  # the request on that row

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._views: list[RequestView] = []  # rows
        self._selected: str | None = None  # id of the selected row
        self._empty = ""  # what the panel says while there are no requests
        self._start = 0  # index of the first row drawn (the list scrolls to keep the selection in view)
        self.border_title = "Requests"
        self.border_subtitle = REQUEST_KEYS

    def show(self, views: list[RequestView], selected: str | None, empty: str = "") -> None:
        """Copies of `views` as they are now: a repaint before the next show draws this moment too."""
        self._views, self._selected, self._empty = [replace(v) for v in views], selected, empty
        live = sum(v.active for v in views)
        self.border_title = f"Requests · {live} live · {len(views) - live} ended"
        self.refresh()

    def render(self) -> Text:
        width, height = self.content_size
        if not self._views:
            return Text(self._empty, style=DIM)
        ids = [v.req_id for v in self._views]
        at = ids.index(self._selected) if self._selected in ids else len(ids) - 1
        start = self._start = first_row(at, len(ids), height)
        id_width = max(len(i) for i in ids)
        lines = [self._row(v, id_width, width) for v in self._views[start : start + height]]
        return Text("\n", no_wrap=True).join(lines)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is not None and 0 <= self._start + offset.y < len(self._views):
            self.post_message(self.Clicked(self._views[self._start + offset.y].req_id))

    def _row(self, view: RequestView, id_width: int, width: int) -> Text:
        selected = view.req_id == self._selected
        row = Text(no_wrap=True, overflow="ellipsis", style="on #2c313a" if selected else "")
        row.append("▶ " if selected else "  ", style="bold")
        row.append(view.req_id.ljust(id_width + 1), style=f"bold {request_color(view.index)}")
        row.append(view.status.upper().ljust(STATUS_WIDTH + 1), style=STATUS_STYLES[view.status])
        row.append(progress(view).rjust(PROGRESS_WIDTH) + "  ")
        return row.append_text(row_note(view, max(0, width - len(row))))
