"""The selected request in full: progress, timings, block table, prompt and text."""

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from enginetui.dashboard.state import RequestView
from enginetui.dashboard.widgets.legend import fitting, title_room
from enginetui.dashboard.widgets.palette import DIM, STATUS_STYLES
from enginetui.plural import count


def seconds(value: float | None) -> str:
    """A duration for humans: ms below a second."""
    if value is None:
        return "—"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def detail_text(view: RequestView, now: float | None, block_size: int) -> Text:
    text = Text()
    text.append(view.status.upper(), style=STATUS_STYLES[view.status])
    if view.status == "sent":  # the engine has not listed it yet: no tokens, no timings
        text.append(f" · not yet listed by the engine · up to {count(view.max_tokens, 'token')} to generate")
        text.append(f"\nprompt · {count(len(view.prompt), 'character')}\n", style="bold")
        return text.append(view.prompt, style=DIM)
    text.append(f" · {view.num_computed_tokens}/{view.num_tokens} tok computed")
    text.append(f" · {view.num_output_tokens}/{view.max_tokens} generated")
    if view.num_cached_tokens:
        text.append(f" · {view.num_cached_tokens} prefix-cached")
    if view.detail:  # a line of its own: wrapped beside the counts, "EOS token" broke in two
        text.append(f"\n{view.finish_reason}: {view.detail}")
    rate = view.tokens_per_s(now)
    text.append(f"\nqueued {seconds(view.queue_time())} · TTFT {seconds(view.ttft())}")
    text.append(f" · {rate:.1f} tok/s" if rate is not None else " · — tok/s")
    if view.num_preemptions:
        preempted = f" · preempted {view.num_preemptions}× (last lost {view.lost_tokens} tok)"
        text.append(preempted, style=STATUS_STYLES["preempted"])
    blocks = view.block_ids
    text.append(f"\nblock table · logical→physical · {len(blocks)} × {block_size} tok\n", style="bold")
    if blocks:
        text.append("  ".join(f"{i}→{b}" for i, b in enumerate(blocks)))
    else:
        text.append("(holds no blocks)", style=DIM)
    text.append(f"\nprompt · {view.num_prompt_tokens} tok\n", style="bold")
    text.append(view.prompt or "—", style=DIM)
    text.append("\noutput\n", style="bold")
    text.append(view.text or "—")
    return text


class RequestDetail(VerticalScroll):
    """Shows one request; scrolls (mouse wheel) when its text is long. Never takes the focus, so the
    dashboard's keys (↑↓ select) keep working after a click on it."""

    can_focus = False

    def compose(self) -> ComposeResult:
        yield Static(Text("select a request with ↑↓", style=DIM), id="detail-body")

    def on_mount(self) -> None:
        self._title: tuple[str, ...] = ("Selected request",)  # the title's wordings, longest first
        self._retitle()

    def on_resize(self) -> None:
        self._retitle()

    def _retitle(self) -> None:
        self.border_title = fitting(self._title, title_room(self))

    def show(self, view: RequestView | None, now: float | None, block_size: int) -> None:
        if view is None:
            return
        self._title = (f"{view.req_id} · {view.status} · block table & timings", f"{view.req_id} · {view.status}")
        self._retitle()
        self.query_one("#detail-body", Static).update(detail_text(view, now, block_size))
