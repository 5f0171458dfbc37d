"""Step panel: scheduled tokens against the budget, prefill/decode split, where the step's time went."""

from rich.text import Text
from textual.widget import Widget

from enginetui.core.engine.events import StepEvent
from enginetui.dashboard.widgets.palette import DIM
from enginetui.plural import count

PREFILL_STYLE = "#61afef"
DECODE_STYLE = "#c678dd"


UNUSED_STYLE = "on #3e4451"  # the budget left unused: blank cells on a grey ground (no glyph to explain)
FEWER_THREADS_STYLE = "bold #e5c07b"  # a step on fewer CPU threads than the engine has (a busy neighbour)


def budget_bar(prefill: int, decode: int, budget: int, width: int) -> Text:
    """▕███▒▒   ▏: prefill █ then decode ▒ out of the token budget, the rest blank."""
    inner = max(1, width - 2)
    p = min(inner, _cells(prefill, budget, inner))
    d = min(inner - p, _cells(decode, budget, inner))
    bar = Text("▕")
    bar.append("█" * p, style=PREFILL_STYLE).append("▒" * d, style=DECODE_STYLE)
    bar.append(" " * (inner - p - d), style=UNUSED_STYLE).append("▏")
    return bar


def threads_text(compute_threads: int, cpu_threads: int) -> Text:
    """ " · 2 threads" for a step on every thread the engine has; " · 1 of 2 threads", highlighted,
    for one the thread governor ran on fewer (other processes competing for the cores); nothing for
    a step that ran no model on a CPU. `cpu_threads`: the engine's count (0: unknown)."""
    if compute_threads <= 0:
        return Text()
    if 0 < cpu_threads and compute_threads < cpu_threads:
        return Text(" · ").append(f"{compute_threads} of {cpu_threads} threads", style=FEWER_THREADS_STYLE)
    return Text(f" · {count(compute_threads, 'thread')}")


def _cells(tokens: int, budget: int, width: int) -> int:
    """Cells for `tokens` of `budget` in `width`; at least one when there are any."""
    return 0 if tokens <= 0 else max(1, round(width * tokens / max(1, budget)))


class StepPanel(Widget):
    """The latest step at a glance."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._event: StepEvent | None = None  # latest step event
        self._dropped = 0  # step events that never reached the dashboard (it fell behind)
        self._cpu_threads = 0  # the engine's CPU threads when uncontended (EngineInfo; 0: unknown)
        self.border_title = "Step"

    def show(self, event: StepEvent | None, dropped: int, cpu_threads: int = 0) -> None:
        self._event, self._dropped, self._cpu_threads = event, dropped, cpu_threads
        if event is not None:  # the latest step's whole time in the title: its parts fit one line in 80 columns
            total = event.sched_ms + event.exec_ms + event.update_ms
            self.border_title = f"Step {event.step} · {total:.1f} ms" if event.step else "Step · none yet"
            if event.async_scheduling and event.is_step:  # which step was planned while which one executed
                self.border_title = (
                    f"Step {event.step} · plan {event.planned_step or '-'} ∥ exec {event.executed_step or '-'}"
                )
        self.refresh()

    def render(self) -> Text:
        e = self._event
        if e is None:
            return Text("no step yet", style=DIM)
        head = f"budget {e.num_scheduled_tokens}/{e.token_budget} "
        bar = budget_bar(e.num_prefill_tokens, e.num_decode_tokens, e.token_budget, self.content_size.width - len(head))
        text = Text(head).append_text(bar)
        line = Text("█", style=PREFILL_STYLE).append(f" prefill {e.num_prefill_tokens} · ")
        line.append("▒", style=DECODE_STYLE).append(f" decode {e.num_decode_tokens} · {count(len(e.scheduled), 'req')}")
        if e.prefix_cache_queries:  # said where there is room (the line never wraps into the next)
            hits = f" · prefix hits {100 * e.prefix_cache_hits / e.prefix_cache_queries:.0f}%"
            if len(line) + len(hits) <= self.content_size.width:
                line.append(hits)
        text.append("\n").append_text(line)
        times = Text(f"sched {e.sched_ms:.1f} · exec {e.exec_ms:.1f} · upd {e.update_ms:.1f} ms")
        placeholders = Text()
        if e.async_scheduling:  # tokens being sampled by steps in flight, not yet known
            placeholders.append(f" · placeholders {sum(r.num_output_placeholders for r in e.running)}", style=DIM)
        threads = threads_text(e.compute_threads, self._cpu_threads)
        if len(times) + len(threads) + len(placeholders) <= self.content_size.width:  # said where there is room
            times.append_text(threads)
        text.append("\n").append_text(times).append_text(placeholders)
        if self._dropped:
            text.append(f"\n{count(self._dropped, 'event')} dropped (dashboard slower than engine)", style=DIM)
        return text
