"""EngineCore's compute threads beside other busy processes: one thread while they compete for the
cores, every thread again once they are gone.

Every step runs hundreds of parallel regions, each ended by a barrier. When another process takes a
core, one compute thread is off its core for a scheduler time slice (milliseconds) while its
partner waits at the barrier: two threads beside one busy process ran the mixed workload at 0.51x
of the speed alone, one thread at 0.57x (and 0.55x of it alone: one thread alone is the slower
choice). So the governor measures how long the compute threads waited, runnable, for a core (the
kernel's per-thread run delay, /proc/self/task/*/schedstat) over a window of steps. A share of
CONTENDED or more in CONTENDED_WINDOWS windows in a row drops to one thread (a single window is a
blip: another engine's last second, a burst of the front-end); after RETRY_S at one thread, or when
new work arrives at an idle engine, it tries every thread again.

Only the EngineCore child uses it, and only with a thread count of its own choosing
(core/worker/cpu_threads.py: no --cpu-threads, no OMP_NUM_THREADS given).
"""

import glob
import logging
import time
from collections.abc import Callable

import torch

WINDOW_S = 1.0  # seconds of stepping measured before each decision
CONTENDED = 0.2  # run delay per compute thread, as a share of the window, that means "competing"
CONTENDED_WINDOWS = 2  # windows in a row that must be contended before the drop to one thread
RETRY_S = 5.0  # seconds at one thread before every thread is tried again

log = logging.getLogger("enginetui.threads")


def threads_run_delay_s() -> float:
    """Seconds this process's threads have spent runnable but waiting for a CPU, summed."""
    total_ns = 0
    for path in glob.glob("/proc/self/task/*/schedstat"):
        try:
            with open(path) as f:
                total_ns += int(f.read().split()[1])  # run time, run delay, time slices
        except (OSError, IndexError, ValueError):  # a thread that ended meanwhile
            continue
    return total_ns / 1e9


def schedstat_available() -> bool:
    return bool(glob.glob("/proc/self/task/*/schedstat"))


class ThreadGovernor:
    """Call `after_step()` after every engine step; it sets torch's intra-op thread count."""

    def __init__(
        self,
        threads: int,
        read_delay: Callable[[], float] = threads_run_delay_s,
        clock: Callable[[], float] = time.monotonic,
        set_threads: Callable[[int], None] = torch.set_num_threads,
    ) -> None:
        self.max_threads = threads  # the thread count chosen for an uncontended machine
        self.threads = threads  # the thread count in use
        self._read_delay = read_delay  # seconds of run delay so far
        self._clock = clock  # seconds, monotonic
        self._set_threads = set_threads  # applies a thread count
        self._window_start = clock()  # when the current window began
        self._delay_start = read_delay()  # run delay at that moment
        self._single_since: float | None = None  # when the governor went to one thread (None: it has not)
        self._contended = 0  # contended windows in a row, up to the last one closed
        self.switches = 0  # thread-count changes so far

    def after_step(self) -> None:
        now = self._clock()
        if self.threads == 1:
            assert self._single_since is not None  # the drop to one thread sets it (a governor starts at 2 or more)
            if now - self._single_since >= RETRY_S:
                log.info("compute threads 1 -> %d: trying every thread again", self.max_threads)
                self._use(self.max_threads, now)
            return
        elapsed = now - self._window_start
        if elapsed < WINDOW_S:
            return
        delay = self._read_delay()
        share = (delay - self._delay_start) / (elapsed * self.threads)
        self._contended = self._contended + 1 if share >= CONTENDED else 0
        if self._contended >= CONTENDED_WINDOWS:
            log.info(
                "compute threads %d -> 1: they waited for a core %.0f%% of the last %.1f s",
                self.threads,
                100 * share,
                elapsed,
            )
            self._use(1, now)
            self._single_since = now
        else:
            self._window_start, self._delay_start = now, delay

    def idle(self) -> None:
        """New work after idle time: a window must not span the idle time, and the work starts with
        every thread (the neighbour may have gone meanwhile)."""
        now = self._clock()
        if self.threads == 1:
            self._use(self.max_threads, now)
        else:
            self._window_start, self._delay_start = now, self._read_delay()

    def _use(self, threads: int, now: float) -> None:
        self._set_threads(threads)
        self.threads = threads
        self.switches += 1
        self._contended = 0
        self._window_start, self._delay_start = now, self._read_delay()
