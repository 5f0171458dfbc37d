"""The vLLM dashboard's panels fed by /metrics and the event log; panels vLLM cannot feed say so.

Each `*_text` function renders from `WatchState` alone (tested without Textual); the widgets
only hold the state and call them at their size.
"""

import time
from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Static

from enginetui.plural import count
from enginetui.state import RequestView
from enginetui.vllm_watch import metrics as m
from enginetui.vllm_watch.state import LATENCIES, QUANTILES, WatchState
from enginetui.widgets.palette import DIM, STATUS_STYLES
from enginetui.widgets.request_detail import seconds
from enginetui.widgets.sparklines import BARS

NOT_PUBLISHED = "#d19a66"  # the colour of "vLLM does not publish this"
LINK_STYLES = {"up": "bold #98c379", "connecting": "#e5c07b", "silent": "#e5c07b", "down": "bold #be5046",
               "off": DIM}
LOG_STYLES = {"store": "#98c379", "evict": "#e06c75", "clear": "bold #e06c75", "replay": "#56b6c2",
              "gap": "bold #e5c07b", "link": "#61afef", "restart": "bold #c678dd", "send": "#abb2bf",
              "finish": "#7f848e", "error": "bold #be5046"}
QUANTILE_NAMES = tuple(f"p{round(q * 100)}" for q in QUANTILES)  # column names of the latency panel
LABEL_WIDTH = 9  # "prompt/s "
VALUE_WIDTH = 8  # " 1234.5"
MIN_RATE_SPAN_S = 0.05  # a request's tok/s needs its tokens spread over this long (chunks read at once are no rate)


def gapped_sparkline(values: Sequence[float | None], width: int, top: float | None = None) -> str:
    """The last `width` values as bars scaled to `top` (default: their maximum); None is a gap."""
    shown = list(values)[-width:] if width > 0 else []
    peak = top if top is not None else max((v for v in shown if v is not None), default=0.0)
    bars = []
    for v in shown:
        if v is None:
            bars.append(" ")
        elif peak <= 0:
            bars.append(BARS[0])
        else:
            bars.append(BARS[min(len(BARS) - 1, round(v / peak * (len(BARS) - 1)))])
    return "".join(bars)


def pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.0f}%"


def title_text(state: WatchState) -> Text:
    """`enginetui · vLLM · ● /metrics up · ● KV events up · model · URL` (the links first: they matter most)."""
    text = Text("enginetui · vLLM · ", style="bold")
    text.append("● ", style=LINK_STYLES[state.link]).append(f"/metrics {state.link}")
    text.append(" · ")
    text.append("● ", style=LINK_STYLES[state.kv_link]).append(f"KV events {state.kv_link}")
    if state.restarts:
        text.append(f" · {state.restarts} restart{'s' if state.restarts > 1 else ''}", style=DIM)
    model = state.server.model if state.server else (state.model_error or "…")
    text.append(f" · {model} · {state.url}")
    return text


def server_text(state: WatchState, width: int) -> Text:
    """The KV pool's use, token and preemption rates, prefix-cache hits: the numbers vLLM publishes."""
    s = state.latest
    if s is None:
        why = state.link_error or f"reading {state.url}/metrics…"
        return Text(why, style=DIM if state.link != "down" else "bold #be5046")
    h = state.history
    text = Text()
    if state.link == "down":
        text.append(f"{state.link_error} · the last reading:\n", style="bold #be5046")
    kv = s.per_engine(m.KV_USAGE)
    blocks, size = state.config("num_gpu_blocks"), state.config("block_size")
    pool = f" of {blocks} blocks × {size} tok" if blocks and size else ""
    usage = sum(kv.values()) / len(kv) if kv else 0.0
    text.append("KV ")
    bar_width = max(4, min(30, width - 40))
    filled = round(bar_width * usage)
    text.append("█" * filled, style="#61afef").append("░" * (bar_width - filled), style=DIM)
    text.append(f" {100 * usage:.0f}% used{pool}")
    if len(kv) > 1:
        text.append(" (" + " · ".join(f"rank {e} {100 * v:.0f}%" for e, v in sorted(kv.items())) + ")", style=DIM)
    gen = h.gen_tok_s[-1] if h.gen_tok_s else 0.0
    prompt = h.prompt_tok_s[-1] if h.prompt_tok_s else 0.0
    text.append(f"\ntokens/s generated {gen:.1f} · prompt {prompt:.1f}")
    text.append(f" · preemptions {s.total(m.PREEMPTIONS) or 0:.0f}")
    if h.preempt_s and h.preempt_s[-1]:
        text.append(f" ({h.preempt_s[-1]:.1f}/s)", style="bold #e06c75")
    text.append(f"\nprefix-cache hits {pct(state.hit_rate(True))} last {state_window(state)} · "
                f"{pct(state.hit_rate(False))} since start · {count(round(s.total(m.REQUESTS_DONE) or 0), 'request')} done")
    caching = state.config("enable_prefix_caching")
    if caching == "False":
        text.append("\nprefix caching is off in this vLLM: nothing is ever cached (--enable-prefix-caching)",
                    style=NOT_PUBLISHED)
    text.append("\nper-step token budget and step times: not published by vLLM", style=NOT_PUBLISHED)
    return text


def state_window(state: WatchState) -> str:
    """How long the recent window is so far (up to WINDOW_S)."""
    if len(state.window) < 2:
        return "—"
    return f"{state.window[-1].time - state.window[0].time:.0f} s"


def queues_text(state: WatchState, width: int) -> Text:
    """Queue lengths over time, one point per /metrics reading (vLLM publishes counts, not which requests)."""
    s = state.latest
    if s is None:
        return Text("—", style=DIM)
    h = state.history
    rows = [("running", h.running, None, "#e5c07b", "{:.0f}"), ("waiting", h.waiting, None, "#d19a66", "{:.0f}")]
    text = _spark_rows(rows, width)
    running, waiting = s.per_engine(m.RUNNING), s.per_engine(m.WAITING)
    if len(running) > 1:
        ranks = " · ".join(f"rank {e} {running[e]:.0f}/{waiting.get(e, 0):.0f}" for e in s.engines)
        text.append(f"\n{ranks} (running/waiting)", style=DIM)
    text.append("\nrequest ids and order: not published by vLLM", style=NOT_PUBLISHED)
    return text


def series_text(state: WatchState, width: int) -> Text:
    """Sparklines, one point per /metrics reading, newest on the right."""
    h = state.history
    rows: list[tuple[str, Sequence[float | None], float | None, str, str]] = [
        ("gen/s", h.gen_tok_s, None, "#98c379", "{:.1f}"),
        ("prompt/s", h.prompt_tok_s, None, "#56b6c2", "{:.1f}"),
        ("KV %", h.kv_pct, 100.0, "#61afef", "{:.0f}%"),
        ("preempt/s", h.preempt_s, None, "#e06c75", "{:.1f}"),
        ("hit %", h.hit_pct, 100.0, "#c678dd", "{:.0f}%"),
    ]
    return _spark_rows(rows, width)


def latency_text(state: WatchState, width: int) -> Text:
    """Latency percentiles from vLLM's histograms (buckets → percentiles), last WINDOW_S and since
    start, with the recent median over time."""
    if state.latest is None:
        return Text("—", style=DIM)
    head = " " * 7 + "".join(f"{name:>8}" for name in QUANTILE_NAMES) + "    n"
    text = Text(head + f"  since start {QUANTILE_NAMES[0]}/{QUANTILE_NAMES[-1]} · median over time", style="bold")
    spark_width = max(0, width - len(head) - 22)
    for name, label in LATENCIES:
        p = state.percentiles(name, label)
        text.append(f"\n{label:<7}")
        for value in p.window:
            text.append(f"{seconds(value):>8}", style="" if value is not None else DIM)
        text.append(f"{p.window_count:>5}")
        text.append(f"  {seconds(p.lifetime[0])}/{seconds(p.lifetime[-1])}".ljust(20), style=DIM)
        text.append(gapped_sparkline(state.history.latency_p50.get(label, ()), spark_width), style="#c678dd")
    return text


def _spark_rows(rows, width: int) -> Text:
    spark_width = max(0, width - LABEL_WIDTH - VALUE_WIDTH)
    text = Text(no_wrap=True)
    for i, (label, series, top, style, fmt) in enumerate(rows):
        if i:
            text.append("\n")
        text.append(label.ljust(LABEL_WIDTH), style="bold")
        text.append(gapped_sparkline(series, spark_width, top).ljust(spark_width), style=style)
        last = series[-1] if series else None
        text.append((fmt.format(last) if last is not None else "—").rjust(VALUE_WIDTH), style="" if last is not None else DIM)
    return text


def log_text(state: WatchState, height: int) -> Text:
    if not state.log:
        return Text("nothing yet", style=DIM)
    lines = []
    for line in list(state.log)[-height:] if height else []:
        row = Text(no_wrap=True, overflow="ellipsis")
        row.append(time.strftime("%H:%M:%S ", time.localtime(line.time)), style=DIM)
        row.append(line.kind.ljust(8), style=LOG_STYLES.get(line.kind, ""))
        lines.append(row.append(line.text))
    return Text("\n", no_wrap=True).join(lines)


def detail_text(view: RequestView) -> Text:
    """A prompt typed here: what came back, timed here."""
    text = Text()
    text.append(view.status.upper(), style=STATUS_STYLES[view.status])
    text.append(f" · {view.num_prompt_tokens} prompt tok · {view.num_output_tokens}/{view.max_tokens} generated")
    if view.detail:
        text.append(f" · {view.finish_reason}: {view.detail}")
    end = view.finished_time or time.time()
    span = end - view.first_token_time if view.first_token_time else 0.0  # first token to the last (or now)
    rate = (view.num_output_tokens - 1) / span if view.num_output_tokens > 1 and span >= MIN_RATE_SPAN_S else None
    text.append(f"\nTTFT {seconds(view.ttft())} (measured here)")
    text.append(f" · {rate:.1f} tok/s" if rate is not None else " · — tok/s")
    text.append("\nblock table, cached tokens, preemptions of one request: not published by vLLM",
                style=NOT_PUBLISHED)
    text.append("\nprompt\n", style="bold").append(view.prompt or "—", style=DIM)
    text.append("\noutput\n", style="bold").append(view.text or "—")
    return text


class TextPanel(Widget):
    """A panel drawn by one `*_text(state, width)` function."""

    def __init__(self, render_fn, title: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self._render_fn = render_fn  # (state, width or height) -> Text
        self._state: WatchState | None = None  # the state to draw
        self.border_title = title

    def show(self, state: WatchState) -> None:
        self._state = state
        self.refresh(layout=True)  # a panel of auto height grows and shrinks with its lines

    def render(self) -> Text:
        if self._state is None:
            return Text("")
        return self._render_fn(self._state, self.content_size.width)


class LogPanel(TextPanel):
    """The newest log lines that fit."""

    def __init__(self, **kwargs) -> None:
        super().__init__(lambda state, width: log_text(state, self.content_size.height), "Event log · KV events and links",
                         **kwargs)


class RequestPanel(VerticalScroll):
    """The selected request in full; scrolls when its text is long."""

    def compose(self) -> ComposeResult:
        yield Static(Text("your prompts go to vLLM's /v1/completions: press i (or Enter) to type one", style=DIM),
                     id="watch-detail-body")

    def on_mount(self) -> None:
        self.border_title = "Selected request"

    def show(self, view: RequestView | None) -> None:
        if view is not None:
            self.border_title = f"{view.req_id} · {view.status}"
            self.query_one("#watch-detail-body", Static).update(detail_text(view))

