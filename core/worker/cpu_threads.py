"""EngineCore's CPU threads: how many compute, how they wait between parallel regions, and the core
left to the front-end, decided in one place and applied where the EngineCore process starts.

OpenMP reads its settings when its runtime loads, so the policy is environment variables for the
EngineCore child (`engine_process_env(config)`, put there by core/engine/engine_host.py); an engine
in the calling process keeps the caller's. Threads (`OMP_NUM_THREADS`): the cores of this process's
affinity mask less `cpu_reserved_cores`. Waiting (`GOMP_SPINCOUNT`): a short spin at barriers, since
libgomp's default burns the core a late partner needs beside any other busy process. With the
default thread count, core/worker/thread_governor.py drops to one thread while others compete.
Explicit settings win: a flag or `EngineConfig` field, else the user's variable, else the default.
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
