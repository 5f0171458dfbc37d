"""A live step-event subscriber, as the dashboard would be: it receives and decodes every event
EngineCore publishes and keeps each step's counts, so a benchmark can both measure what a
subscriber costs and sum what the steps did (prefill tokens, preemptions).
"""

import threading
from dataclasses import dataclass

from enginetui.core.engine.event_subscriber import EventSubscriber
from enginetui.core.engine.events import StepEvent


@dataclass(slots=True)
class StepCounts:
    """What the steps in a window did, summed from their events."""

    steps: int  # steps whose event arrived
    missed: int  # steps in the window whose event never arrived (dropped by the publisher)
    prefill_tokens: int  # prompt (and recompute) tokens computed
    decode_tokens: int  # decode tokens computed
    preemptions: int  # requests preempted


class EventCounter:
    """Counts every step event on EngineCore's event address (an EventSubscriber thread)."""

    def __init__(self, address: str, ready_timeout_s: float = 30.0) -> None:
        self._steps: dict[int, tuple[int, int, int]] = {}  # step -> (prefill, decode, preempted)
        self._latest = 0  # highest step seen, snapshots and updates included
        self._cond = threading.Condition()  # guards the two above; notified on every event
        self._subscriber = EventSubscriber(address, self._count, ready_timeout_s=ready_timeout_s)

    def wait_for_step(self, step: int, timeout_s: float = 10.0) -> None:
        """Block until the event of `step` (or a later one) arrived, or the timeout passed."""
        with self._cond:
            self._cond.wait_for(lambda: self._latest >= step, timeout_s)

    def counts(self, after_step: int, through_step: int) -> StepCounts:
        """Sum the events of steps after_step+1 .. through_step."""
        with self._cond:
            rows = [self._steps[s] for s in range(after_step + 1, through_step + 1) if s in self._steps]
        return StepCounts(
            steps=len(rows),
            missed=(through_step - after_step) - len(rows),
            prefill_tokens=sum(r[0] for r in rows),
            decode_tokens=sum(r[1] for r in rows),
            preemptions=sum(r[2] for r in rows),
        )

    def close(self) -> None:
        self._subscriber.close()

    def _count(self, event: StepEvent) -> None:
        with self._cond:
            if event.is_step:
                self._steps[event.step] = (event.num_prefill_tokens, event.num_decode_tokens, len(event.preempted))
            self._latest = max(self._latest, event.step)
            self._cond.notify_all()
