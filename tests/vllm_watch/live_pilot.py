"""Pilot waits for the live vLLM tests: poll the app's state until it holds, never a fixed time."""

import asyncio


async def until(pilot, done, what: str, timeout: float) -> None:
    """Let the app run until `done()`, then briefly more so the screen redraws; after `timeout`
    seconds, fail naming `what` the watch did not get to."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not done():
        if loop.time() > deadline:
            raise TimeoutError(f"the watch did not get to: {what}")
        await pilot.pause(0.1)
    await pilot.pause(0.2)
