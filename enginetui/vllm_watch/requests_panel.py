"""The vLLM column's request list and a request's detail: every request through the proxy, each timed as it went by (nothing on them is made up: what the wire did not
carry shows as —)."""

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from enginetui.dashboard.widgets.palette import DIM, STATUS_STYLES, request_color
from enginetui.dashboard.widgets.requests_table import RequestsTable, one_line, tail
from enginetui.vllm_watch.requests import WatchedRequest

STATUS_WIDTH = 9  # "STREAMING"
STYLES = {**STATUS_STYLES, "streaming": STATUS_STYLES["running"]}  # by status
MIN_RATE_SPAN_S = 0.05  # a request's tok/s needs its tokens spread over this long (chunks read at once are no rate)


def ms(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value * 1000:.0f}ms" if value < 1 else f"{value:.2f}s"


def progress(view: WatchedRequest) -> str:
    """Tokens generated (vLLM's usage, else chunks of text), or the status code of another route."""
    if not view.generates:
        return f"{view.method} {view.http_status or '…'}"
    if view.tokens() is None:
        return view.tokens_text()
    limit = f"/{view.max_tokens}" if view.max_tokens is not None and view.active else ""
    return f"{view.tokens()}{limit} tok"


class WatchRequestsTable(RequestsTable):
    """One row per request: id, status, TTFT, tokens, then its text as it streams (or why it ended)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._drawn: tuple | None = (
            None  # what show() drew: each row's (id, status, text length, tokens, TTFT), the selection
        )

    # Rows are WatchedRequests, not RequestViews: the base's drawing reads only req_id and active of them.
    def show(self, views: list[WatchedRequest], selected: str | None, empty: str = "") -> None:  # type: ignore[override]
        drawn = (
            tuple(
                (v.req_id, v.status, len(v.text), v.tokens(), v.token_chunks, v.first_token, v.rebuilt_preemptions)
                for v in views
            ),
            selected,
            empty,
        )
        if drawn == self._drawn:
            return  # no request moved: nothing to repaint
        self._drawn = drawn
        self._views, self._selected, self._empty = list(views), selected, empty  # type: ignore[arg-type]
        live = sum(v.active for v in views)
        self.border_title = f"Requests · {live} live · {len(views) - live} ended"
        self.refresh()

    def _row(self, view: WatchedRequest, id_width: int, width: int) -> Text:  # type: ignore[override]
        selected = view.req_id == self._selected
        row = Text(no_wrap=True, overflow="ellipsis", style="on #2c313a" if selected else "")
        row.append("▶ " if selected else "  ", style="bold")
        row.append(view.req_id.ljust(id_width + 1), style=f"bold {request_color(view.index)}")
        row.append(view.status.upper().ljust(STATUS_WIDTH + 1), style=STYLES.get(view.status, ""))
        row.append(ms(view.ttft()).rjust(7) + " ", style=DIM if view.ttft() is None else "")
        row.append(progress(view).rjust(10) + "  ")
        room = max(0, width - len(row))
        if view.status in ("rejected", "error"):
            return row.append(tail(one_line(view.detail or view.status), room), style=STYLES[view.status])
        note = Text()
        if view.rebuilt_preemptions:
            note.append(f"preempted ×{view.rebuilt_preemptions} (rebuilt) · ", style="yellow")
        if not view.active and view.finish_reason:
            note.append(f"{view.finish_reason} · ", style=DIM)
        body = view.text if view.text else view.prompt
        note.append(tail(one_line(body), max(0, room - len(note))), style="" if view.text else DIM)
        return row.append_text(note)


def detail_text(view: WatchedRequest) -> Text:
    """A request in full: where it came from, its timings as they went by, its prompt and text."""
    text = Text()
    text.append(view.status.upper(), style=STYLES.get(view.status, ""))
    text.append(f" · {view.method} {view.route} · from {view.source}")
    if view.http_status is not None:
        text.append(f" · HTTP {view.http_status}")
    arrived = time.strftime("%H:%M:%S", time.localtime(view.arrival)) + f".{int(view.arrival % 1 * 1000):03d}"
    text.append(f"\narrived {arrived}")
    if view.generates:
        prompt = f"{view.prompt_tokens} prompt tok" if view.prompt_tokens is not None else "prompt tok —"
        limit = f"/{view.max_tokens}" if view.max_tokens is not None else ""
        text.append(f" · {prompt}\n{view.tokens_text()}{limit} generated")  # a line of their own: whole when wrapped
        if view.model:
            text.append(f" · {view.model}", style=DIM)
        end = view.finished or time.time()
        span = end - view.first_token if view.first_token is not None else 0.0
        tokens = view.tokens()
        rate = (tokens - 1) / span if tokens is not None and tokens > 1 and span >= MIN_RATE_SPAN_S else None
        text.append(f"\nTTFT {ms(view.ttft())} (from the proxy's arrival) · ITL {ms(view.itl())}")  # not vLLM's
        text.append(f" · {rate:.1f} tok/s" if rate is not None else " · — tok/s")
        if view.tokens() is None and view.first_token is not None:
            text.append(" (no usage asked for: ITL per chunk)", style=DIM)
        if view.finished is not None:
            text.append(f" · e2e {ms(view.finished - view.arrival)}")
        text.append("\nqueue time: not on the wire (TTFT includes it)", style=DIM)
        if not view.stream and view.generates:
            text.append(" · not streamed: no first-token time", style=DIM)
    if view.finish_reason or view.detail:
        text.append(
            f"\n{view.finish_reason or view.status}" + (f": {view.detail}" if view.detail else ""),
            style=STYLES.get(view.status, ""),
        )
    text.append("\nprompt\n", style="bold").append(view.prompt or "—", style=DIM)
    if view.generates:
        text.append("\noutput\n", style="bold").append(view.text or "—")
    return text


class RequestPanel(VerticalScroll):
    """The selected request in full; scrolls when its text is long."""

    def __init__(self, hint: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self._hint = hint  # what it says before any request was selected
        self._text: Text | None = None  # the request as drawn last

    def compose(self) -> ComposeResult:
        yield Static(Text(self._hint, style=DIM), id="watch-detail-body")

    def on_mount(self) -> None:
        self.border_title = "Selected request"

    def show(self, view: WatchedRequest | None) -> None:
        if view is None:
            return
        text = detail_text(view)
        if text == self._text:
            return  # unchanged: nothing to repaint
        self._text = text
        self.border_title = f"{view.req_id} · {view.status}"
        self.query_one("#watch-detail-body", Static).update(text)
