"""Recordings of FakeEngine runs (deterministic: the same events every time), for replay tests."""

import asyncio

import msgspec

from core.sampling_params import SamplingParams
from tests.dashboard.fake_engine import FakeEngine
from tests.dashboard.scenes import PROMPTS as SCENE_PROMPTS
from tests.record.recordings import INFO, write

PROMPTS = (
    *SCENE_PROMPTS,
    "Count the golden stones by the silver river",
    "A careful model answered the distant patient kernel",
)


async def fake_run_events(steps: int, **engine_kwargs) -> list:
    """A snapshot, then every event of `steps` hand-stepped FakeEngine steps over PROMPTS (32-48 tokens each)."""
    engine = FakeEngine(autostep=False, **engine_kwargs)
    events = [await engine.snapshot()]
    stream = engine.events()
    follow = asyncio.create_task(_collect(stream, events))
    await asyncio.sleep(0)  # the subscription is in place before anything happens

    async def consume(i: int, prompt: str) -> None:
        params = SamplingParams(max_tokens=32 + 4 * i, ignore_eos=True)
        async for _ in engine.generate(prompt, params, f"r{i + 1}"):
            pass

    streams = [asyncio.create_task(consume(i, p)) for i, p in enumerate(PROMPTS)]
    await asyncio.sleep(0)
    for _ in range(steps):
        await engine.step_once()
        await asyncio.sleep(0)
    while not engine.drained():
        await asyncio.sleep(0)
    follow.cancel()
    for task in streams:
        task.cancel()
    await asyncio.gather(follow, *streams, return_exceptions=True)
    return events


async def _collect(stream, events: list) -> None:
    async for event in stream:
        events.append(event)


async def record_fake_run(path, steps: int = 60, **engine_kwargs) -> str:
    """Write a recording of a FakeEngine run (by default a 16-block pool: chunked prefill and preemptions)."""
    engine_kwargs = {"num_blocks": 16, "token_budget": 48, **engine_kwargs}
    events = await fake_run_events(steps, **engine_kwargs)
    info = msgspec.structs.replace(INFO, vocab_size=4096, num_blocks=engine_kwargs["num_blocks"], eos_token_ids=[])
    return write(path, events, engine=info)
