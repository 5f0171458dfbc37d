"""The engine not being timed is frozen: SIGSTOP on its process group for the other engine's pass.

Engines compared on one machine take turns, and idle is not quiet: an idle vLLM's CPU worker threads
wake hundreds of times a second, each wake taking a core from the timed engine's OpenMP threads. vLLM
runs in its own session, so stopping the group stops all of it; if this process dies meanwhile, the
kernel continues the orphaned group (SIGHUP, SIGCONT): nothing is left stopped.
"""

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator


@contextlib.contextmanager
def frozen(*sessions: subprocess.Popen) -> Iterator[None]:
    """Stop the process group of each of these session leaders (started with start_new_session=True)
    while inside; continue them after. A group that has already ended is skipped."""
    stopped = []
    try:
        for proc in sessions:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGSTOP)
                    stopped.append(proc)
        yield
    finally:
        for proc in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGCONT)
