"""Waits in Pilot tests: let the app run until its state holds, never a fixed time."""

import asyncio
from collections.abc import Callable


async def until(
    pilot,
    done,
    what: str = "the awaited state",
    timeout: float = 60.0,
    poll_s: float = 0.02,
    seen: Callable[[], str] | None = None,
) -> None:
    """Let the app run until `done()`, then briefly more so the screen redraws; after `timeout`
    seconds, fail naming `what` the app did not get to (and what `seen()` says it got to instead)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not done():
        if loop.time() > deadline:
            raise TimeoutError(f"the app did not get to: {what}" + (f"; it got to: {seen()}" if seen else ""))
        await pilot.pause(poll_s)
    await pilot.pause(0.05)
