"""Engine steps timed plainly, then under the torch profiler: the measurement `bench ops` makes of
both engines. This file imports only the standard library and torch: vLLM's runner
(vllm_runner.py, in vLLM's own interpreter) loads it by path, so both engines are measured by the
same code."""

import time
from typing import Callable


def profile_steps(step: Callable[[], object], steps: int) -> dict:
    """Run `step` `steps` times timing each call, then `steps` more under the torch profiler (CPU
    activities, this thread). Returns {"step_ms": [each plain step's ms], "profiled_step_ms": the
    profiled steps' mean ms, "ops": {operator name: [self time in microseconds over the profiled steps,
    calls]}}. Self time: an operator's own, not its children's, so the operators' times add up."""
    from torch.profiler import ProfilerActivity, profile

    plain = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        plain.append((time.perf_counter() - start) * 1e3)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            step()
        profiled_ms = (time.perf_counter() - start) * 1e3 / steps
    ops = {e.key: [float(e.self_cpu_time_total), int(e.count)] for e in prof.key_averages()
           if e.self_cpu_time_total > 0}
    return {"step_ms": plain, "profiled_step_ms": profiled_ms, "ops": ops}
