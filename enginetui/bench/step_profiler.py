"""Engine steps timed plainly, then under the torch profiler: the measurement `bench ops` makes of
both engines. This file imports only the standard library and torch: vLLM's runner
(vllm_runner.py, in vLLM's own interpreter) loads it by path, so both engines are measured by the
same code."""

import os
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager


def profile_steps(step: Callable[[], object], steps: int, prepare: Callable[[], object] = lambda: None) -> dict:
    """Run `step` `steps` times timing each call, then `steps` more each under its own torch profiler
    (CPU activities, this thread); `prepare` runs before every step, untimed and unprofiled (it adds
    the request whose prompt the step computes). Returns {"step_ms": [each plain step's ms],
    "profiled_step_ms": the profiled steps' mean ms, "ops": {operator name: [self time in microseconds
    over the profiled steps, calls]}}. Self time: an operator's own, not its children's, so the
    operators' times add up."""
    from torch.profiler import ProfilerActivity, profile

    plain = []
    for _ in range(steps):
        prepare()
        plain.append(_timed_ms(step))
    profiled_ms = 0.0
    ops: dict[str, list] = {}
    for _ in range(steps):
        prepare()
        prof = profile(activities=[ProfilerActivity.CPU])
        with _no_stderr():  # the profiler's library logs a line at every start and stop
            prof.start()
        try:
            profiled_ms += _timed_ms(step)
        finally:
            with _no_stderr():
                prof.stop()
        for event in prof.key_averages():
            if event.self_cpu_time_total > 0:
                total = ops.setdefault(event.key, [0.0, 0])
                total[0] += float(event.self_cpu_time_total)
                total[1] += int(event.count)
    return {"step_ms": plain, "profiled_step_ms": profiled_ms / steps, "ops": ops}


def _timed_ms(step: Callable[[], object]) -> float:
    start = time.perf_counter()
    step()
    return (time.perf_counter() - start) * 1e3


@contextmanager
def _no_stderr():
    """File descriptor 2 to /dev/null for the block (what C++ libraries write there too)."""
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
