"""Before a timed pass: wait until the machine is quiet, so what ran before it does not spill into it.

An engine can keep a core busy for a second or more after its pass has returned (vLLM's worker
does), and the next engine timed takes that for a busy neighbour: our EngineCore's thread governor
then runs the first seconds of its pass on fewer threads.
"""

import sys
import time
from collections.abc import Callable

import psutil

QUIET_SHARE = 0.15  # the machine's busy share (all cores) below which it counts as quiet
SAMPLE_S = 0.2  # length of one sample
QUIET_SAMPLES = 2  # consecutive quiet samples needed
TIMEOUT_S = 10.0  # waiting longer than this, the pass runs anyway (and says so)


def busy_share(seconds: float) -> float:
    """The share of all cores busy over the next `seconds` (blocks for that long)."""
    return psutil.cpu_percent(interval=seconds) / 100


def wait_until_quiet(
    sample: Callable[[float], float] = busy_share, clock: Callable[[], float] = time.monotonic
) -> bool:
    """Return once QUIET_SAMPLES samples in a row were quiet (True), or after TIMEOUT_S (False, with
    a line on stderr)."""
    deadline = clock() + TIMEOUT_S
    quiet = 0
    while clock() < deadline:
        quiet = quiet + 1 if sample(SAMPLE_S) < QUIET_SHARE else 0
        if quiet >= QUIET_SAMPLES:
            return True
    print(
        f"bench: the machine was still busy after {TIMEOUT_S:.0f} s of waiting; this pass runs beside that load",
        file=sys.stderr,
    )
    return False
