"""The engine not being timed is frozen: SIGSTOP on its process group for the other engine's pass.

Engines compared on one machine take turns, and the one waiting sits idle beside the one timed.
Idle is not quiet: vLLM 0.32's CPU worker keeps a dozen gloo TCP threads that each wake 100 times a
second, so an idle vLLM `LLM` or OpenAI server wakes about 1,300 times a second (an idle enginetui
EngineCore never, its server 11 times). On 2 cores every wake takes a core from one of the timed
engine's two OpenMP threads and stalls the other at the next barrier: 16 streams of 200 tokens
through `enginetui serve` took a median 8.0 s beside an idle vLLM server and 7.3 s with it stopped
(5 passes each, in turns, AMD EPYC Zen 5). vLLM runs in its own session (its process group), so
stopping the group stops every process of it, and if this process dies while it is stopped, the
kernel continues the orphaned group with SIGHUP and SIGCONT: nothing is left stopped.
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
