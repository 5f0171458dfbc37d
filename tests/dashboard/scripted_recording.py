"""Recordings of hand-stepped runs of the real engine with the scripted model runner
(tests/fakes/scripted_engine.py): the same events every time, for the replay and export tests."""

import asyncio

from enginetui.core.sampling_params import SamplingParams
from tests.dashboard.scenes import PROMPTS as SCENE_PROMPTS
from tests.fakes.scripted_engine import ScriptedEngine
from tests.record.recordings import write

PROMPTS = (
    *SCENE_PROMPTS,
    "Count the golden stones by the silver river",
    "A careful model answered the distant patient kernel",
)
WAIT_S = 30.0  # longest the recording waits for the engine to take in a request or publish an event


async def scripted_run_events(steps: int, engine: ScriptedEngine) -> list:
    """The greeting snapshot, one update per request added (PROMPTS, 24-44 tokens each, one at a
    time), then every event of `steps` hand steps."""
    events: list = []
    follow = asyncio.create_task(_collect(engine.events(), events))

    async def consume(i: int, prompt: str) -> None:
        params = SamplingParams(max_tokens=24 + 4 * i, ignore_eos=True)
        async for _ in engine.generate(prompt, params, f"r{i + 1}"):
            pass

    await _until(lambda: len(events) >= 1)  # subscribed: its greeting snapshot came
    streams = []
    for i, prompt in enumerate(PROMPTS):  # one at a time: one update event each
        streams.append(asyncio.create_task(consume(i, prompt)))
        await _until(lambda i=i: any(a.req_id == f"r{i + 1}" for e in events for a in e.added))
    for _ in range(steps):
        await engine.step_once()
    await _until(engine.drained)
    follow.cancel()
    for task in streams:
        task.cancel()
    await asyncio.gather(follow, *streams, return_exceptions=True)
    return events


async def _until(done) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while not done():
        if loop.time() > deadline:
            raise TimeoutError("the engine did not get there")
        await asyncio.sleep(0.01)


async def _collect(stream, events: list) -> None:
    async for event in stream:
        events.append(event)


async def record_scripted_run(path, steps: int = 60, **engine_kwargs) -> str:
    """Write a recording of a hand-stepped run (by default a 16-block pool: chunked prefill, two
    preemptions (of r6, at steps 18 and 26), every request finished by step 57)."""
    engine = ScriptedEngine(autostep=False, **{"num_blocks": 16, "token_budget": 48, **engine_kwargs})
    try:
        events = await scripted_run_events(steps, engine)
        return write(path, events, engine=engine.info)
    finally:
        engine.shutdown()
