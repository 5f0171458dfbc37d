"""Step-time models: a step's shape -> the seconds it takes, and the clock that follows from it.

Every model moves the simulated clock with `advance(now, shape)`; most only say how long a step
takes (`step_seconds`). The models: `RooflineModel` (roofline.py, an accelerator's peaks and the
model's FLOPs and bytes), `FittedModel` (fitted.py, fitted to this engine's measured steps), and
`ReplayedStepTimes` here (a recorded run's own step times, to reproduce it).
"""

from typing import TYPE_CHECKING

from enginetui.core.engine.events import StepEvent
from enginetui.core.sched.step_shape import StepShape

if TYPE_CHECKING:
    import numpy as np


class StepTimeModel:
    """Maps a step's shape to seconds."""

    name = "step-time model"  # what the reports call it

    def step_seconds(self, shape: StepShape) -> float:
        raise NotImplementedError

    def advance(self, now: float, shape: StepShape) -> float:
        """The clock after the step `shape` that started at `now`."""
        return now + self.step_seconds(shape)

    def decode_seconds(self, first_step: int, num_reqs: int, contexts: "np.ndarray") -> "np.ndarray":
        """Seconds of consecutive pure-decode steps of `num_reqs` requests (each samples one token), numbered
        from `first_step`, whose decoding requests attend to `contexts` [steps] tokens in all: what
        step_seconds gives each (models may compute it in one go, to the same bits)."""
        import numpy as np

        return np.array(
            [
                self.step_seconds(StepShape(first_step + j, num_reqs, 0, num_reqs, num_reqs, int(c), 0, 0))
                for j, c in enumerate(contexts.tolist())
            ],
            dtype=np.float64,
        )

    def next_start(self, now: float, step: int) -> float:
        """When step number `step` (1-based) may start, the engine being free at `now`: at once."""
        return now


def step_start(event: StepEvent) -> float:
    """When a recorded step began: its event's time less the step's measured stages (schedule, execute,
    update). The simulator and the recorded workload use this one expression, so they agree exactly."""
    return event.time - (event.sched_ms + event.exec_ms + event.update_ms) / 1e3


class ReplayedStepTimes(StepTimeModel):
    """A recorded run's clock: step k starts when the recorded step k started and ends when its event was
    built; the engine's time between steps (publishing, taking in requests) passes as recorded. Driven
    with the same run's arrivals (from_recording.py), the simulated steps start and end exactly when
    the recorded ones did."""

    name = "replayed step times"

    def __init__(self, step_events: list[StepEvent]) -> None:
        if not step_events:
            raise ValueError("the recording holds no engine step to replay")
        self.starts = [step_start(e) for e in step_events]  # per step (0-based): when it began
        self.ends = [e.time for e in step_events]  # per step: when its event was built

    def next_start(self, now: float, step: int) -> float:
        return max(now, self.starts[step - 1]) if step <= len(self.starts) else now

    def advance(self, now: float, shape: StepShape) -> float:
        if shape.step > len(self.ends):
            raise ValueError(f"the simulation took more steps than the {len(self.ends)} recorded: it diverged")
        return self.ends[shape.step - 1]


class SharedHost(StepTimeModel):
    """One replica's steps on a host it shares with other replicas: `base`'s time, times `factor`, which the
    fleet sets before each step (fleet.py: 1 + the slowdown times the share of the other replicas busy then;
    replicas that share a machine's memory bandwidth and caches slow each other's steps down)."""

    def __init__(self, base: StepTimeModel) -> None:
        self.base = base
        self.name = base.name
        self.factor = 1.0

    def step_seconds(self, shape: StepShape) -> float:
        return self.base.step_seconds(shape) * self.factor
