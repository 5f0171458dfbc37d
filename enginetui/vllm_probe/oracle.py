"""The probe as the outside rebuild's oracle: vLLM's exact queues and KV blocks at each /metrics reading.

The probe's events say vLLM's state after every step; `ProbeTruth` keeps it by the time each event
reached this process. A /metrics reading (read at `time`, on the same clock) is compared with the
probe's state then, the latest event taken by that time; so is the rebuild's state for that reading
(vllm_watch/sched_rebuild.py, a `RebuildCheck` per reading). A figure agrees within ±TOLERANCE (the
rebuild's own rule, vllm_watch/reconstruct.py): running, waiting, and KV blocks in use (vLLM's
`kv_cache_usage_perc` of its pool; the probe's blocks not free).
"""

from bisect import bisect_right
from collections import deque
from dataclasses import dataclass, field

from enginetui.core.engine.events import StepEvent
from enginetui.vllm_watch import prometheus as m
from enginetui.vllm_watch.prometheus import MetricsSample
from enginetui.vllm_watch.reconstruct import TOLERANCE
from enginetui.vllm_watch.sched_rebuild import SchedRebuild

MAX_STATES = 200_000  # probe states kept to look readings up in (the older half goes when full)
MAX_COMPARISONS = 10_000  # readings kept per comparison


@dataclass(frozen=True, slots=True)
class ProbeState:
    """vLLM's scheduler after one step, as the probe published it."""

    seq: int  # the event's seq
    step: int  # vLLM's busy-loop step
    running: int  # requests running
    waiting: int  # requests waiting (preempted ones included)
    used_blocks: int  # KV blocks not free (cached free blocks count as free, as in vLLM's usage)
    num_blocks: int  # the pool, less vLLM's null block


def probe_state(event: StepEvent) -> ProbeState:
    return ProbeState(
        event.seq,
        event.step,
        len(event.running),
        len(event.waiting),
        event.num_blocks - event.num_free_blocks,
        event.num_blocks,
    )


@dataclass(frozen=True, slots=True)
class Comparison:
    """One reading's figures (vLLM's /metrics, or the rebuild's) against the probe's state then."""

    time: float  # when the reading was read
    probe: ProbeState  # the truth
    running: float
    waiting: float
    blocks: float | None  # KV blocks in use (None: not reported)

    @property
    def running_agrees(self) -> bool:
        return abs(self.running - self.probe.running) <= TOLERANCE

    @property
    def waiting_agrees(self) -> bool:
        return abs(self.waiting - self.probe.waiting) <= TOLERANCE

    @property
    def blocks_agree(self) -> bool | None:
        return None if self.blocks is None else abs(self.blocks - self.probe.used_blocks) <= TOLERANCE

    @property
    def agrees(self) -> bool:
        return self.running_agrees and self.waiting_agrees and self.blocks_agree is not False

    def figure_agrees(self, figure: str) -> bool | None:
        """running | waiting | blocks agreed (None: the blocks were not reported)."""
        return {"running": self.running_agrees, "waiting": self.waiting_agrees, "blocks": self.blocks_agree}[figure]


@dataclass(slots=True)
class Scores:
    """Comparisons of one side with the probe, and how often they agreed."""

    comparisons: deque[Comparison] = field(default_factory=lambda: deque(maxlen=MAX_COMPARISONS))

    def add(self, comparison: Comparison) -> None:
        self.comparisons.append(comparison)

    @property
    def count(self) -> int:
        return len(self.comparisons)

    @property
    def agreeing(self) -> int:
        return sum(c.agrees for c in self.comparisons)

    def share(self, figure: str) -> float | None:
        """The share of readings on which one figure (running | waiting | blocks) agreed (None: none compared)."""
        votes = [v for c in self.comparisons if (v := c.figure_agrees(figure)) is not None]
        return sum(votes) / len(votes) if votes else None


@dataclass(slots=True)
class ProbeTruth:
    """The probe's states by arrival, and the readings scored against them."""

    times: list[float] = field(default_factory=list)  # when each state's event arrived (time.time())
    states: list[ProbeState] = field(default_factory=list)
    metrics: Scores = field(default_factory=Scores)  # vLLM's own /metrics gauges against the probe
    rebuild: Scores = field(default_factory=Scores)  # the outside rebuild against the probe
    _scored: tuple[SchedRebuild | None, float] = (None, float("-inf"))  # (the rebuild, its last check scored)

    def event(self, event: StepEvent, arrived: float) -> None:
        """An event taken from the probe at `arrived`."""
        if len(self.states) >= MAX_STATES:
            del self.times[: MAX_STATES // 2], self.states[: MAX_STATES // 2]
        self.times.append(arrived)
        self.states.append(probe_state(event))

    def at(self, when: float) -> ProbeState | None:
        """The probe's state at `when`: after the latest event taken by then (None: none yet)."""
        i = bisect_right(self.times, when)
        return self.states[i - 1] if i else None

    def reading(self, sample: MetricsSample) -> None:
        """vLLM's gauges in one /metrics reading, against the probe then."""
        truth = self.at(sample.time)
        if truth is None:
            return
        kv = sample.per_engine(m.KV_USAGE)
        blocks = next(iter(kv.values())) * truth.num_blocks if len(kv) == 1 else None
        self.metrics.add(
            Comparison(sample.time, truth, sample.total(m.RUNNING) or 0.0, sample.total(m.WAITING) or 0.0, blocks)
        )

    def score_rebuild(self, rebuild: SchedRebuild | None) -> None:
        """The rebuild's checks made since the last call, each against the probe at its reading's time."""
        if rebuild is None:
            return
        scored, last = self._scored
        if scored is not rebuild:  # a new rebuild (vLLM restarted): its checks start over
            last = float("-inf")
        for check in rebuild.checks:
            if check.time <= last:
                continue
            last = check.time
            truth = self.at(check.time)
            if truth is not None:
                self.rebuild.add(
                    Comparison(check.time, truth, check.rebuilt_running, check.rebuilt_waiting, check.rebuilt_kv_blocks)
                )
        self._scored = (rebuild, last)
