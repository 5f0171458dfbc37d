"""When each engine step ran, from a recording's step events (the rule both exports share).

A step event is built when its step is done; the step began its scheduler, model and update
phases (sched_ms + exec_ms + update_ms) before that. With asynchronous scheduling the model phase
of a busy-loop step began in the step before, so the step is its own phases (its plan, its wait,
its update), from the first of them to the event.
"""

from bisect import bisect_left
from dataclasses import dataclass

from enginetui.core.engine.events import StepEvent


@dataclass(frozen=True, slots=True)
class StepSpan:
    """One engine step's place in time (seconds, time.time())."""

    step: int  # engine step counter
    start: float  # when scheduling began
    end: float  # when the step's event was built

    @staticmethod
    def of(event: StepEvent) -> "StepSpan":
        if event.async_scheduling:
            own = [p.start for p in event.phases if p.name != "execute"]
            return StepSpan(event.step, min(own, default=event.time), event.time)
        return StepSpan(event.step, event.time - step_ms(event) / 1e3, event.time)


def step_ms(event: StepEvent) -> float:
    """The step's own time: schedule + execute + update."""
    return event.sched_ms + event.exec_ms + event.update_ms


class StepClock:
    """Step numbers to times, for a run's steps (a step missing from the recording takes the next one's)."""

    def __init__(self, spans: list[StepSpan]) -> None:
        self.spans = spans  # every recorded step, in order
        self._steps = [s.step for s in spans]  # their numbers, for bisecting

    def span(self, step: int) -> StepSpan:
        at = min(bisect_left(self._steps, step), len(self.spans) - 1)
        return self.spans[at]
