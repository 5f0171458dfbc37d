"""EngineCore's CPU threads: how many compute, how they wait between parallel regions, and the core
left to the front-end, decided in one place and applied where the EngineCore process starts.

OpenMP reads its settings when its runtime loads (with torch), so the policy is a set of
environment variables for the EngineCore child, `engine_process_env(config)`, which the engine
host puts in the child's environment when it starts it (core/engine/engine_host.py). An engine run
in the calling process (`multiprocess=False`) keeps the caller's own settings.

- Threads (`cpu_threads`, `OMP_NUM_THREADS`): every core this process may run on (its affinity
  mask), less `cpu_reserved_cores` left to the front-end (the client, detokenizing, the dashboard).
- Waiting (`cpu_spin_count`, `GOMP_SPINCOUNT`): how long an OpenMP thread that reached a barrier first
  spins before it sleeps. libgomp's default (300,000 pause loops, milliseconds) is what makes the
  engine collapse beside any other busy process: a waiting thread burns the core its late partner
  needs. A short spin keeps most of the speed of spinning when the engine has the machine and gives
  the core back quickly when it does not.

- Adapting (core/worker/thread_governor.py): when the thread count is the default one, the child
  drops to one thread while other processes compete for the cores, and returns to all of them.

Explicit settings win: a flag or `EngineConfig` field, else the environment variable the user
already set (`OMP_NUM_THREADS`, `GOMP_SPINCOUNT`, `OMP_WAIT_POLICY`), else the measured default
(a thread count given either way is kept as given: no adapting).
"""

import os

import torch

from enginetui.core.config import EngineConfig
from enginetui.core.worker.thread_governor import ThreadGovernor, schedstat_available

DEFAULT_SPIN_COUNT = 10_000  # GOMP_SPINCOUNT: pause loops (about a millisecond) before a waiting thread sleeps
ADAPT_ENV = "ENGINETUI_ADAPT_THREADS"  # "1" in the child's environment: its thread count may adapt


def usable_cores() -> int:
    """CPUs this process may run on (its affinity mask, which containers and taskset narrow)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def engine_threads(config: EngineConfig) -> int:
    """Intra-op threads EngineCore computes with."""
    if config.cpu_threads is not None:
        return config.cpu_threads
    if "OMP_NUM_THREADS" in os.environ:
        return max(1, int(os.environ["OMP_NUM_THREADS"]))
    return max(1, usable_cores() - config.cpu_reserved_cores)


def engine_process_env(config: EngineConfig) -> dict[str, str]:
    """Environment variables to set in the EngineCore child before torch loads there."""
    if config.torch_device.type != "cpu":
        return {}
    env = {"OMP_NUM_THREADS": str(engine_threads(config))}
    if config.cpu_threads is None and "OMP_NUM_THREADS" not in os.environ:
        env[ADAPT_ENV] = "1"
    if config.cpu_spin_count is not None:
        env["GOMP_SPINCOUNT"] = str(config.cpu_spin_count)
    elif "GOMP_SPINCOUNT" not in os.environ and "OMP_WAIT_POLICY" not in os.environ:
        env["GOMP_SPINCOUNT"] = str(DEFAULT_SPIN_COUNT)
    return env


def thread_governor() -> ThreadGovernor | None:
    """In the EngineCore child: the governor of its thread count, if the count is its own to adapt."""
    if os.environ.get(ADAPT_ENV) != "1" or torch.get_num_threads() < 2 or not schedstat_available():
        return None
    return ThreadGovernor(torch.get_num_threads())
