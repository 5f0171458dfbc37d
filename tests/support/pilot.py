"""Waits in Pilot tests: let the app run until its state holds, never a fixed time."""

import asyncio


async def until(pilot, done, what: str = "the awaited state", timeout: float = 60.0, poll_s: float = 0.02) -> None:
    """Let the app run until `done()`, then briefly more so the screen redraws; after `timeout`
    seconds, fail naming `what` the app did not get to."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not done():
        if loop.time() > deadline:
            raise TimeoutError(f"the app did not get to: {what}")
        await pilot.pause(poll_s)
    await pilot.pause(0.05)
