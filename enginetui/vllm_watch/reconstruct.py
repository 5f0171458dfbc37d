"""How a /metrics reading is checked against vLLM's queues rebuilt from the wire (sched_rebuild.py): within
TOLERANCE requests of vLLM's gauges, and which readings count."""

from collections.abc import Iterable, Sequence

TOLERANCE = 1  # requests: a rebuilt queue within this of vLLM's agrees


class QueuesCompared:
    """What a check of vLLM's queues against rebuilt ones says, for a dataclass with the fields `running`,
    `waiting` (vLLM's gauges), `rebuilt_running` and `rebuilt_waiting`."""

    __slots__ = ()
    running: float
    waiting: float
    rebuilt_running: int
    rebuilt_waiting: int

    @property
    def traffic(self) -> bool:
        """Either side had a request queued or running."""
        return bool(self.running or self.waiting or self.rebuilt_running or self.rebuilt_waiting)

    @property
    def agrees(self) -> bool:
        return (
            abs(self.running - self.rebuilt_running) <= TOLERANCE
            and abs(self.waiting - self.rebuilt_waiting) <= TOLERANCE
        )


def worth_checking(check: QueuesCompared, checks: Sequence[QueuesCompared]) -> bool:
    """Whether a reading joins the checks: readings with traffic, and the first back at rest (so the latest
    check shows the queues at rest); later idle ones would agree trivially."""
    return check.traffic or bool(checks and checks[-1].traffic)


def agreement(checks: Iterable[QueuesCompared]) -> tuple[int, int]:
    """(readings that agree, readings compared)."""
    checks = list(checks)
    return sum(c.agrees for c in checks), len(checks)
