"""SIGTERM ends a command as Ctrl-C does.

On SIGTERM (`kill PID`) Python dies at once and runs no `finally` block, so a command that started
processes in sessions of their own (the benchmarks' vLLM engines and servers, their busy neighbour)
would leave them running, and one that holds an engine would not shut it down in order. Inside
`sigterm_interrupts()` SIGTERM raises KeyboardInterrupt in the main thread instead, so every cleanup
that Ctrl-C runs, runs.
"""

import contextlib
import signal
from collections.abc import Iterator


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt for the duration of the block (main thread only)."""
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt
