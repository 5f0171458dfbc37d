"""Keeping the dashboard's CPU use under a share of one core, by drawing less often.

Textual's drawing of a full, busy screen costs milliseconds of CPU a frame (about 18 ms at
160x50 with 64 requests running, on the 2-core development machine). When the dashboard shares
the cores with a CPU engine, that time is the engine's: each moment the dashboard runs, one of the
engine's threads is off its core and the other waits for it at the next barrier. The pacer
measures the process's own CPU time over the last seconds and lets a redraw through only while
that share is under the budget, and in any case once `MAX_GAP_S` has passed since the last one, so
the screen never stands still. A redraw held back is not lost: the next one draws the latest state.
"""

import time
from collections import deque
from collections.abc import Callable

WINDOW_S = 2.0  # the CPU share is measured over this much of the recent past
MAX_GAP_S = 1.0  # a redraw at least this often, whatever it costs


class RedrawPacer:
    """Says whether a redraw may run now. `max_cpu_share` is a fraction of one core (0: no bound)."""

    def __init__(
        self,
        max_cpu_share: float,
        clock: Callable[[], float] = time.monotonic,
        cpu_clock: Callable[[], float] = time.process_time,
    ) -> None:
        self.max_cpu_share = max_cpu_share  # the budget, as a fraction of one core; 0 or less: none
        self._clock = clock  # wall time, seconds
        self._cpu_clock = cpu_clock  # this process's CPU time (all its threads), seconds
        self._samples: deque[tuple[float, float]] = deque()  # (wall, cpu) at recent calls, oldest first
        self._last_draw = float("-inf")  # wall time of the last redraw let through

    def may_draw(self) -> bool:
        """True if a redraw may run now (and counts it as run)."""
        now, cpu = self._clock(), self._cpu_clock()
        self._samples.append((now, cpu))
        while now - self._samples[0][0] > WINDOW_S:
            self._samples.popleft()
        if self.max_cpu_share <= 0 or now - self._last_draw >= MAX_GAP_S or self.cpu_share() <= self.max_cpu_share:
            self._last_draw = now
            return True
        return False

    def cpu_share(self) -> float:
        """The process's CPU time over the window, as a fraction of one core (0 before two samples)."""
        (wall0, cpu0), (wall1, cpu1) = self._samples[0], self._samples[-1]
        return (cpu1 - cpu0) / (wall1 - wall0) if wall1 > wall0 else 0.0
