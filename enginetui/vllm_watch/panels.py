"""The vLLM dashboard's panels fed by /metrics and the event log; panels vLLM cannot feed say so.

Each `*_text` function renders from `WatchState` alone (tested without Textual); the widgets
only hold the state and call them at their size.
"""

import math
import time
from collections.abc import Sequence

from rich.text import Text
from textual.widget import Widget

from enginetui.dashboard.widgets.model_panel import wrap_items
from enginetui.dashboard.widgets.palette import DIM
from enginetui.dashboard.widgets.sparklines import BARS
from enginetui.plural import count
from enginetui.vllm_watch import prometheus as m
from enginetui.vllm_watch.reconstruct import TOLERANCE, agreement
from enginetui.vllm_watch.sched_rebuild import SchedRebuild
from enginetui.vllm_watch.state import LATENCIES, QUANTILES, WatchState
from enginetui.vllm_watch.tree_panel import TreeContext

NOT_PUBLISHED = "#d19a66"  # the colour of "vLLM does not publish this"
LINK_STYLES = {"up": "bold #98c379", "connecting": "#e5c07b", "silent": "#e5c07b", "down": "bold #be5046", "off": DIM}
QUANTILE_NAMES = tuple(f"p{round(q * 100)}" for q in QUANTILES)  # column names of the latency panel
NARROW_LATENCY = 60  # below this width the latency panel shows p50, p99 and the mean only


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
    """`vLLM · ● /metrics up · ● KV events up · model · HOST:PORT` (the links first: they matter most; the
    terminal's title says enginetui)."""
    text = Text("vLLM · ", style="bold")
    text.append("● ", style=LINK_STYLES[state.link]).append(f"/metrics {state.link}")
    text.append(" · ")
    text.append("● ", style=LINK_STYLES[state.kv_link]).append(f"KV events {state.kv_link}")
    if state.restarts:
        text.append(f" · {state.restarts} restart{'s' if state.restarts > 1 else ''}", style=DIM)
    model = short_model(state.server.model) if state.server else (state.model_error or "…")
    text.append(f" · {model} · {state.url.removeprefix('http://')}")  # the scheme said once, in the help screen
    if state.proxy_url:
        text.append(f" · proxy {state.proxy_url.removeprefix('http://')} ({state.proxied} passed)", style="#61afef")
    elif state.proxy_error:
        text.append(f" · {state.proxy_error}", style="bold #be5046")
    return text


def short_model(name: str) -> str:
    """A served model named by a local path (vLLM serves one under its path) as its folder's name,
    so the title keeps the server's address; other names as they are. The help screen has it whole."""
    return "…/" + name.rstrip("/").rsplit("/", 1)[-1] if name.startswith("/") else name


def figure_lines(*rows: Sequence[str | Text], width: int, separator: str = " · ") -> Text:
    """Rows of figures, each row's items joined by `separator` and wrapped whole at `width` (an item is
    never cut between lines), so a narrow panel shows every figure on more lines."""
    text = Text()
    for row in rows:
        if row:
            if text:
                text.append("\n")
            text.append_text(wrap_items([Text(i) if isinstance(i, str) else i for i in row], width, separator))
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
    usage = sum(kv.values()) / len(kv) if kv else 0.0
    bar_width = max(4, min(30, width - 40))
    filled = round(bar_width * usage)
    bar = Text("KV ").append("█" * filled, style="#61afef").append("░" * (bar_width - filled), style=DIM)
    used: list[str | Text] = [bar.append(f" {100 * usage:.0f}% used")]
    if blocks and size:
        used.append(f"of {blocks} blocks × {size} tok")
    if len(kv) > 1:
        used += [Text(f"rank {e} {100 * v:.0f}%", style=DIM) for e, v in sorted(kv.items())]
    gen = h.gen_tok_s[-1] if h.gen_tok_s else 0.0
    prompt = h.prompt_tok_s[-1] if h.prompt_tok_s else 0.0
    preempted = Text(f"preemptions {s.total(m.PREEMPTIONS) or 0:.0f}")
    if h.preempt_s and h.preempt_s[-1]:
        preempted.append(f" ({h.preempt_s[-1]:.1f}/s)", style="bold #e06c75")
    rates: list[str | Text] = [f"tokens/s generated {gen:.1f}", f"prompt {prompt:.1f}", preempted]
    hits = [
        f"prefix-cache hits {pct(state.hit_rate(True))} last {state_window(state)}",
        f"{pct(state.hit_rate(False))} since start",
        f"{count(round(s.total(m.REQUESTS_DONE) or 0), 'request')} done",
    ]
    text.append_text(figure_lines(used, rates, hits, width=width))
    caching = state.config("enable_prefix_caching")
    if caching == "False":
        off = figure_lines(
            "prefix caching is off in this vLLM: nothing is ever cached (--enable-prefix-caching)".split(),
            width=width,
            separator=" ",
        )
        off.stylize(NOT_PUBLISHED)
        text.append("\n").append_text(off)
    return text


def state_window(state: WatchState) -> str:
    """How long the recent window is so far (up to WINDOW_S)."""
    if len(state.window) < 2:
        return "—"
    return f"{state.window[-1].time - state.window[0].time:.0f} s"


def why_text(state: WatchState, s: m.MetricsSample, width: int) -> Text:
    """vLLM's queues and why requests wait (`s`: the latest reading): the limits they wait for, the
    reasons vLLM gives, what a step takes."""
    limits = state.limits
    seqs = f" of max {limits.max_num_seqs}" if limits.max_num_seqs else ""
    now: list[str | Text] = [Text("/metrics: ", style="bold").append(f"running {s.total(m.RUNNING) or 0:.0f}{seqs}")]
    reasons = state.waiting_by_reason()
    waiting = f"waiting {s.total(m.WAITING) or 0:.0f}"
    if reasons:
        waiting += " (" + ", ".join(f"{reason} {n:.0f}" for reason, n in sorted(reasons.items())) + ")"
    now.append(waiting)
    running, waiting_per = s.per_engine(m.RUNNING), s.per_engine(m.WAITING)
    if len(running) > 1:
        now += [Text(f"rank {e} {running[e]:.0f}/{waiting_per.get(e, 0):.0f}", style=DIM) for e in s.engines]
    kv = s.per_engine(m.KV_USAGE)
    if kv:
        now.append(f"KV {100 * max(kv.values()):.0f}%")
    steps, per_step = state.steps(), list[str | Text]()
    if steps is not None and steps.steps:
        if steps.steps_per_s is not None:
            per_step.append(f"{steps.steps_per_s:.1f} steps/s")
        per_step.append(f"{steps.mean_tokens:.1f} tok/step")
        if steps.max_tokens is not None and math.isfinite(steps.max_tokens):
            per_step.append(f"none over {steps.max_tokens:g}")
        if limits.max_num_batched_tokens:
            per_step.append(f"budget {limits.max_num_batched_tokens} tok")
    text = figure_lines(now, per_step, width=width)
    if limits.source == "/server_info":
        text.append("\nlimits read from vLLM's /server_info", style=DIM)
    if not (limits.max_num_seqs and limits.max_num_batched_tokens):
        hint = figure_lines(
            "limits unknown: pass vLLM's --max-num-seqs, --max-num-batched-tokens".split(),
            width=width,
            separator=" ",
        )
        hint.stylize(DIM)
        text.append("\n").append_text(hint)
    return text


def rebuild_text(rebuild: SchedRebuild, width: int) -> Text:
    """The scheduler rebuild's latest state and how often it agreed with vLLM's gauges."""
    last = rebuild.checks[-1]
    agree, total = agreement(rebuild.checks)
    items: list[str | Text] = [
        f"running {last.rebuilt_running}",
        f"waiting {last.rebuilt_waiting}",
        f"agrees ±{TOLERANCE} on {100 * agree / total:.0f}% of {total} readings",
        f"preemptions {last.rebuilt_preemptions} (vLLM {last.preemptions:.0f})",
    ]
    blocks = [c.blocks_agree for c in rebuild.checks if c.blocks_agree is not None]
    if blocks:
        items.append(
            f"KV blocks {last.rebuilt_kv_blocks} (±{TOLERANCE} of vLLM's on {100 * sum(blocks) / len(blocks):.0f}%)"
        )
    cached = [c.cached_agree for c in rebuild.checks if c.cached_agree is not None]
    if cached:
        items.append(
            f"cached {last.rebuilt_cached_blocks} (±{TOLERANCE} of KV events' on "
            f"{100 * sum(cached) / len(cached):.0f}%)"
        )
    if rebuild.num_skipped:
        items.append(Text(f"{rebuild.num_skipped} requests left out (no usage)", style=DIM))
    items[0] = Text("rebuilt: ", style=DIM).append(items[0])  # by this engine's scheduler (the help screen says)
    return figure_lines(items, width=width)


def duration(value: float | None) -> str:
    """A duration to 3 significant digits: ms below a second (a mean of 0.24 ms stays 0.24 ms)."""
    if value is None:
        return "—"
    return f"{value * 1000:.3g} ms" if value < 1 else f"{value:.3g} s"


def bucket_range(bucket: tuple[float, float] | None) -> str:
    """A histogram bucket (lower, upper] in words: `10–25 ms`, `≤1 ms`, `>10 s`."""
    if bucket is None:
        return "—"
    lower, upper = bucket
    if math.isinf(upper):
        return f">{duration(lower)}".replace(" ", "")
    scale, unit = (1000, "ms") if upper < 1 else (1, "s")
    if lower <= 0:
        return f"≤{upper * scale:g} {unit}"
    return f"{lower * scale:g}–{upper * scale:g} {unit}"


def latency_text(state: WatchState, width: int) -> Text:
    """Latency from vLLM's histograms, as finely as their buckets allow: the bucket each quantile's
    observation lies in and the exact mean (`_sum / _count`), over the last WINDOW_S and since
    start, with the recent mean over time."""
    if state.latest is None:
        return Text("—", style=DIM)
    narrow = width < NARROW_LATENCY  # the median and the tail only, no count
    shown = [0, len(QUANTILES) - 1] if narrow else list(range(len(QUANTILES)))  # the quantiles shown, by index
    column = 10 if narrow else 11  # a bucket's range: "250–500 ms"
    head = (
        " " * 6
        + "".join(f"{QUANTILE_NAMES[i]:>{column}}" for i in shown)
        + f"{'mean':>10}"
        + ("" if narrow else "    n")
    )
    since = width >= len(head) + 20  # room for the mean since start (a narrow panel keeps its own columns whole)
    text = Text(head + ("  mean since start · over time" if since else ""), style="bold")
    spark_width = max(0, width - len(head) - 22)
    for name, label in LATENCIES:
        p = state.latency(name, label)
        text.append(f"\n{label:<6}")
        for i in shown:
            text.append(f"{bucket_range(p.window[i]):>{column}}", style="" if p.window[i] is not None else DIM)
        text.append(f"{duration(p.window_mean):>10}")
        if not narrow:
            text.append(f"{p.window_count:>5}")
        if since:
            text.append(f"  {duration(p.mean)}".ljust(20), style=DIM)
            text.append(gapped_sparkline(state.history.latency_mean.get(label, ()), spark_width), style="#c678dd")
    return text


class TextPanel(Widget):
    """A panel drawn by one `*_text(state, width)` function."""

    def __init__(self, render_fn, title: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self._render_fn = render_fn  # (state, width or height) -> Text
        self._state: WatchState | None = None  # the state to draw
        self._text: Text | None = None  # what it drew last (a redraw that changes nothing repaints nothing)
        self.border_title = title

    def show(self, state: WatchState) -> None:
        self._state = state
        text = self._render_fn(state, self.content_size.width)
        if text == self._text:
            return
        lines = None if self._text is None else self._text.plain.count("\n")
        self._text = text
        self.refresh(layout=lines != text.plain.count("\n"))  # a panel of auto height follows its lines

    def render(self) -> Text:
        if self._state is None:
            return Text("")
        self._text = self._render_fn(self._state, self.content_size.width)
        return self._text


KV_HINT = (
    'start vLLM with --kv-events-config \'{"enable_kv_cache_events": true, "publisher": "zmq", '
    '"endpoint": "tcp://*:5557", "replay_endpoint": "tcp://*:5558"}\' and pass --kv-events '
    "(vLLM listens on a tcp://*:PORT or ipc:// endpoint; given tcp://HOST:PORT it connects out instead)"
)


def tree_context(s: WatchState) -> TreeContext:
    """What the prefix tree panel shows beside the KV events, from the rest of the state."""
    hits = s.latest.per_engine(m.PREFIX_HITS) if s.latest else {}
    stale = ""
    if s.link == "down" and s.down_since is not None and s.caches.ranks:
        since = time.strftime("%H:%M:%S", time.localtime(s.down_since))
        stale = f"vLLM has not answered since {since}: the cache as it was then"
    return TreeContext(
        pool_blocks=s.config("num_gpu_blocks"),
        block_size=s.config("block_size"),
        hit_tokens={int(e): v for e, v in hits.items() if e.isdigit()},
        empty_note=_empty_tree_note(s),
        stale_note=stale,
        tokenizer_note=s.tokenizer_note,
    )


def _empty_tree_note(s: WatchState) -> str:
    if s.kv_link == "off":
        return f"KV events are not listened to: {KV_HINT}"
    if s.link != "up" and s.server is None:
        return f"waiting for vLLM at {s.url} (its KV events: {s.kv_endpoint})"
    if s.kv_error and s.kv_link != "up":
        return f"{s.kv_error}\n{KV_HINT}"
    return f"listening on {s.kv_endpoint}: nothing cached yet (a block is cached once a request has a full block of tokens)"
