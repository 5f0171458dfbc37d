"""CPU time a process has used: what the benchmarks read of an engine or a server beside its wall time."""

import psutil


def cpu_seconds(process: psutil.Process | None) -> float:
    """CPU time (user + system, every thread) the process has used so far; 0 without one."""
    if process is None:
        return 0.0
    times = process.cpu_times()
    return times.user + times.system
