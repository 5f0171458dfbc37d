"""vLLM's queues rebuilt from what the wire shows, request by request, and how often they agree
with vLLM's own gauges.

From the requests typed here and passed through the proxy (their arrival, first token and end)
a request counts as waiting from its arrival until its first token and as running from its
first token until its response ended. That is a lower bound of the truth: the prefill before the
first token runs in vLLM while it waits here, and a preempted request (waiting again in vLLM)
keeps counting as running, its tokens only pausing. Each /metrics reading is compared with the
rebuilt queues at the time it was read; the agreement is the share of readings within ±1 of
vLLM's running and waiting gauges. It means something only while every client goes through the
proxy (requests sent to vLLM directly are invisible here).

Not done: rebuilding with this engine's scheduler and KV manager (block counts, preemptions,
prefix hits per request).
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from enginetui.vllm_watch.requests import WatchedRequest

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


@dataclass(frozen=True, slots=True)
class QueueCheck(QueuesCompared):
    """One /metrics reading against the rebuilt queues."""

    time: float  # when it was read
    running: float  # vLLM's num_requests_running
    waiting: float  # vLLM's num_requests_waiting
    rebuilt_running: int  # requests between their first token and their end, here
    rebuilt_waiting: int  # requests between their arrival and their first token, here


def rebuilt_queues(requests: Iterable[WatchedRequest], at: float) -> tuple[int, int]:
    """(running, waiting) at time `at`, from the generating requests seen."""
    running = waiting = 0
    for view in requests:
        if not view.generates or view.arrival > at or (view.finished is not None and view.finished <= at):
            continue
        if view.status in ("rejected", "error") and view.first_token is None:
            continue  # refused: never queued in vLLM
        if view.first_token is not None and view.first_token <= at:
            running += 1
        else:
            waiting += 1
    return running, waiting


def agreement(checks: Iterable[QueuesCompared]) -> tuple[int, int]:
    """(readings that agree, readings compared)."""
    checks = list(checks)
    return sum(c.agrees for c in checks), len(checks)
