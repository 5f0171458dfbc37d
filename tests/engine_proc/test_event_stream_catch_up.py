"""A subscriber that falls behind still ends level with the engine: when the engine goes quiet
after events that subscriber lost (its queue was full when they were published), the stream sends
it a snapshot of the current state instead of leaving it on a stale event."""

import asyncio

import pytest

from enginetui.core.engine.async_llm import AsyncLLM
from enginetui.core.engine.core_client import SUB_RCVHWM
from enginetui.core.engine.event_publisher import PUB_SNDHWM
from enginetui.core.sampling_params import SamplingParams
from tests.fakes.scripted_runner import SCRIPTED_RUNNER

pytestmark = [pytest.mark.timeout(120), pytest.mark.asyncio]


async def test_a_subscriber_that_lost_the_last_events_gets_the_engine_state_once_it_is_quiet():
    llm = AsyncLLM.from_engine_args(
        model=None,
        model_runner=SCRIPTED_RUNNER,
        multiprocess=False,
        device="cpu",
        seed=0,
        num_gpu_blocks_override=64,
        max_num_seqs=8,
        max_model_len=512,
    )
    try:
        stream = llm.events()
        first = await anext(stream)  # subscribed (the greeting snapshot)
        assert first.is_snapshot
        # Far more steps than both queues hold, while the subscriber reads nothing: it loses the tail
        # (as a rule: the transport's own buffers can keep more than the queues).
        max_tokens = 3 * (PUB_SNDHWM + SUB_RCVHWM)  # 384
        outs = [out async for out in llm.generate("one two three", SamplingParams(max_tokens=max_tokens), "r1")]
        assert outs[-1].finished
        engine_seq = (await llm.snapshot()).seq  # the engine is idle: nothing more will be published
        got = []
        async with asyncio.timeout(30):
            while not got or got[-1].seq < engine_seq:
                got.append(await anext(stream))
        last = got[-1]
        assert last.seq == engine_seq  # level with the engine
        assert not last.running and not last.waiting and last.num_free_blocks == 64
        if last.is_snapshot:  # the tail was lost: the catch-up snapshot stands for it, and the loss is counted
            assert sum(e.num_dropped_events for e in got) > 0
        else:  # the last event itself arrived (the queues had drained by then, seen under CI's load): every
            # event the subscriber lost before it, early or late in the run, is counted in the event after the gap
            for before, after in zip([first, *got], got):
                assert after.num_dropped_events == after.seq - before.seq - 1
        await stream.aclose()
    finally:
        llm.shutdown()
