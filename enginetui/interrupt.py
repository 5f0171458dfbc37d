"""SIGTERM ends a command as Ctrl-C, or the dashboard's quit key, does.

On SIGTERM (`kill PID`) Python dies at once and runs no `finally` block, so a command that started
processes in sessions of their own (the benchmarks' vLLM engines and servers, their busy neighbour)
would leave them running, one that holds an engine would not shut it down in order, and a dashboard
would leave its terminal in the app's screen (raw mode, the alternate screen, mouse reporting on).
- `sigterm_interrupts()`: SIGTERM raises KeyboardInterrupt in the main thread for the block, so every
  cleanup that Ctrl-C runs, runs (the benchmarks, `enginetui serve`).
- `sigterm_quits(app)`: SIGTERM quits the Textual app for the block, as its quit key does: the
  terminal is restored and the caller's cleanup shuts the engine down (every dashboard).
"""

import contextlib
import signal
from collections.abc import Callable, Iterator
from typing import Any


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt for the duration of the block (main thread only)."""
    with _on_sigterm(_interrupt):
        yield


@contextlib.contextmanager
def sigterm_quits(app: Any) -> Iterator[None]:
    """SIGTERM calls the Textual `app`'s exit() in its event loop for the duration of the block; outside
    the loop (before it starts, after it ends) it raises KeyboardInterrupt."""

    def quit_app(signum, frame) -> None:
        import asyncio

        try:
            loop = asyncio.get_running_loop()  # the handler runs in the main thread, inside the app's loop
        except RuntimeError:
            raise KeyboardInterrupt from None
        # call_soon_threadsafe is safe from a signal handler: the loop wakes and runs it. The exit itself waits in
        # the app's message queue (call_later), which the app reads only once it has mounted its widgets: an exit
        # while they are being mounted would leave the screen empty and the app's on_mount failing on it.
        loop.call_soon_threadsafe(app.call_later, app.exit)

    with _on_sigterm(quit_app):
        yield


@contextlib.contextmanager
def _on_sigterm(handler: Callable[[int, Any], None]) -> Iterator[None]:
    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt
