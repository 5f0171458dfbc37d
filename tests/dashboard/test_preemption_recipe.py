"""The README's recipe `enginetui --num-gpu-blocks-override 24`, then Ctrl-B: the first burst preempts.

The dashboard's first burst is `burst_requests(Random(seed 0), the default settings, 8)` sent to
AsyncLLM at once; the same requests on the same pool must report preemptions in the step events."""

import asyncio
import random

from enginetui.core.engine.async_llm import AsyncLLM
from enginetui.core.record.reader import read_recording
from enginetui.dashboard.bursts import burst_requests
from enginetui.dashboard.engine_link import sampling_params
from enginetui.settings import SamplingSettings

RECIPE_BLOCKS = 24  # the README's --num-gpu-blocks-override
BURST_SIZE = 8  # the dashboard's --burst-size default


def test_the_first_burst_on_the_readmes_tiny_pool_preempts(tmp_path):
    requests = burst_requests(random.Random(0), SamplingSettings(), BURST_SIZE)  # the app's rng: Random(--seed or 0)
    path = tmp_path / "burst.etrec"

    async def run() -> list:
        engine = AsyncLLM.from_engine_args(model=None, num_gpu_blocks_override=RECIPE_BLOCKS, record=path)

        async def one(i: int, prompt: str, settings: SamplingSettings):
            async for out in engine.generate(prompt, sampling_params(settings), request_id=f"r{i}"):
                last = out
            return last

        try:
            return await asyncio.gather(*(one(i, p, s) for i, (p, s) in enumerate(requests)))
        finally:
            await engine.stop_recording()
            engine.shutdown()

    outputs = asyncio.run(run())
    assert [o.outputs[0].finish_reason for o in outputs] == ["length"] * BURST_SIZE  # every request finished
    steps = [event for event in read_recording(path).events() if event.is_step]
    assert sum(len(event.preempted) for event in steps) >= 1
    assert max(event.num_blocks - event.num_free_blocks for event in steps) == RECIPE_BLOCKS
