"""How often a watcher reads /metrics: every `base_s` while the server works, less often while it
idles, and at once again when work shows.

An idle vLLM's readings repeat themselves (nothing running or waiting, no counter moves), yet each
one costs a parse and a redraw of every panel. After each reading that shows no work and no change
from the one before, the wait doubles, up to IDLE_BACKOFF times `base_s`; a reading that shows work, a KV event batch,
or a prompt sent from the dashboard or through its proxy brings it back to `base_s` (a wake cuts the current wait short).
So an idle screen is at most IDLE_BACKOFF x `base_s` behind the server (8 s at the default 1 s),
and a busy one `base_s`.
"""

import asyncio

from enginetui.vllm_watch import prometheus as m
from enginetui.vllm_watch.prometheus import MetricsSample

IDLE_BACKOFF = 8  # an idle server is read this many times less often, at most
# What a reading shows of the server's work: queues, KV in use and the counters that move with it.
ACTIVITY = (
    m.RUNNING,
    m.WAITING,
    m.KV_USAGE,
    m.PROMPT_TOKENS,
    m.GENERATION_TOKENS,
    m.REQUESTS_DONE,
    m.PREEMPTIONS,
    m.PREFIX_QUERIES,
)


def activity(sample: MetricsSample) -> tuple[float | None, ...]:
    """The reading's activity figures (equal between two readings: nothing happened in between)."""
    return tuple(sample.total(name) for name in ACTIVITY)


def busy(sample: MetricsSample) -> bool:
    """Requests running or waiting, or KV blocks in use."""
    return any(sample.total(name) for name in (m.RUNNING, m.WAITING, m.KV_USAGE))


class PollPacing:
    """The wait before the next /metrics reading."""

    def __init__(self, base_s: float) -> None:
        self.base_s = base_s  # the interval while the server works
        self.max_s = IDLE_BACKOFF * base_s  # the longest interval while it idles
        self.interval_s = base_s  # the wait after the latest reading
        self._last: tuple[float | None, ...] | None = None  # the previous reading's activity figures
        self._woken = asyncio.Event()  # set by wake() until the next reading starts: the wait ends now
        self._reading_woken = False  # the reading under way was asked for by a wake

    def reading_starts(self) -> None:
        """A reading begins: it answers the wakes so far. A wake from now on (work that this reading may
        have started too early to see) is kept, and ends the wait after it at once."""
        self._reading_woken = self._woken.is_set()
        self._woken.clear()

    def after_reading(self, sample: MetricsSample | None) -> float:
        """The wait after a reading (None: the reading failed; the link's state is kept fresh)."""
        figures = activity(sample) if sample is not None else None
        woken = self._reading_woken or self._woken.is_set()
        if woken or sample is None or busy(sample) or figures != self._last:
            self.interval_s = self.base_s
        else:
            self.interval_s = min(self.interval_s * 2, self.max_s)
        self._last = figures
        return self.interval_s

    def wake(self) -> None:
        """Work shows outside /metrics (a KV event batch, a prompt sent): read soon, and often again."""
        self.interval_s = self.base_s
        self._woken.set()

    async def wait(self, seconds: float) -> None:
        """Sleep `seconds`, or less if woken (since the latest reading started)."""
        try:
            await asyncio.wait_for(self._woken.wait(), timeout=seconds)
        except TimeoutError:
            pass
