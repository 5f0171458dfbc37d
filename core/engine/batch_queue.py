"""Asynchronous scheduling's batch queue: steps planned by the scheduler, executing on a model thread.

As vLLM's EngineCore.step_with_batch_queue with a queue of depth 2: the busy loop plans step N+1
and hands it to the model thread while step N is still executing there, then waits for step N and
applies its tokens while N+1 runs. The model thread runs one step at a time, in plan order, so the
runner always holds the tokens it sampled in step N when it starts N+1 (it feeds them to N+1 for
the scheduler's placeholders). On CPU the overlap is real because torch releases the GIL inside its
kernels: while the model thread computes N+1, the busy loop's Python (update of N, outputs, events,
the plan of N+2) runs on the other thread.
"""

import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import torch

from enginetui.core.sched.output import SchedulerOutput
from enginetui.core.worker.model_runner import ModelRunnerOutput
from enginetui.core.worker.runner_class import Runner

BATCH_QUEUE_DEPTH = 2  # steps in flight at most (vLLM: max_concurrent_batches with async scheduling)


@dataclass(slots=True)
class ExecutedStep:
    """What the model thread did with one plan."""

    output: ModelRunnerOutput | None  # the sampled tokens (None when execution raised)
    error: str  # "Type: message" of the exception that failed it ("" when it ran)
    start: float  # time.time() when execution began
    end: float  # time.time() when it ended


@dataclass(slots=True)
class InFlightStep:
    """A planned step handed to the model thread, not yet applied to the scheduler."""

    step: int  # its plan number
    plan: SchedulerOutput  # what it computes
    future: Future  # resolves to its ExecutedStep


class BatchQueue:
    """Plans in flight, newest first, executed one at a time by one model thread."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner  # executes the plans
        self.steps: deque[InFlightStep] = deque()  # newest at the left
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="model-step")  # the model thread

    def __len__(self) -> int:
        return len(self.steps)

    def submit(self, step: int, plan: SchedulerOutput) -> None:
        # OpenMP thread counts are per thread: the model thread computes with the busy loop's count
        # (which the thread governor may change between steps).
        future = self._thread.submit(self._execute, plan, torch.get_num_threads())
        self.steps.appendleft(InFlightStep(step, plan, future))

    def is_full(self) -> bool:
        return len(self.steps) >= BATCH_QUEUE_DEPTH

    def pop_oldest(self) -> tuple[InFlightStep, ExecutedStep]:
        """Wait for the oldest step in flight to finish executing; it leaves the queue."""
        step = self.steps.pop()
        return step, step.future.result()

    def _execute(self, plan: SchedulerOutput, num_threads: int) -> ExecutedStep:
        if torch.get_num_threads() != num_threads:
            torch.set_num_threads(num_threads)
        start = time.time()
        try:
            output = self.runner.execute(plan)
        except Exception as exc:  # reported to the busy loop, which fails the step's requests
            return ExecutedStep(None, f"{type(exc).__name__}: {exc}", start, time.time())
        return ExecutedStep(output, "", start, time.time())

    def close(self) -> None:
        """Let the step in flight finish, then end the model thread."""
        self._thread.shutdown(wait=True)
