"""Events never lie: after any change of engine state — outside steps too — a subscriber's latest
event equals the engine's state within a second, and says what happened."""

import asyncio

import pytest
import pytest_asyncio

from enginetui.core.engine.async_llm import AsyncLLM
from enginetui.core.engine.events import StepEvent
from enginetui.core.sampling_params import SamplingParams
from tests.engine_proc.engine_args import engine_args

pytestmark = [pytest.mark.timeout(120), pytest.mark.asyncio(loop_scope="module")]

NUM_BLOCKS = 24  # 384 tokens, less than max_model_len (512): a request needing more is the engine's to reject


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=[True, False], ids=["multiproc", "inproc"])
async def llm(request, engine_model_dir):
    engine = AsyncLLM.from_engine_args(
        multiprocess=request.param,
        **engine_args(engine_model_dir, num_gpu_blocks_override=NUM_BLOCKS, enable_prefix_caching=True),
    )
    yield engine
    engine.shutdown()


class Watcher:
    """Follows the event stream; `after(action)` returns the first event published after it."""

    def __init__(self, llm: AsyncLLM) -> None:
        self.llm = llm
        self.events: list[StepEvent] = []
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        async for event in self.llm.events():
            self.events.append(event)

    async def latest_within(self, seconds: float, pred) -> StepEvent:
        """The latest event once it satisfies `pred`, waiting up to `seconds` for that."""
        return await self._within(seconds, pred, lambda: self.events[-1:])

    async def any_within(self, seconds: float, pred) -> StepEvent:
        """The first event so far that satisfies `pred`, waiting up to `seconds` for one."""
        return await self._within(seconds, pred, lambda: self.events)

    async def _within(self, seconds: float, pred, candidates) -> StepEvent:
        """The first of `candidates()` that satisfies `pred`, asked again until one does or `seconds` pass."""
        deadline = asyncio.get_running_loop().time() + seconds
        while asyncio.get_running_loop().time() < deadline:
            found = next((e for e in candidates() if pred(e)), None)
            if found is not None:
                return found
            await asyncio.sleep(0.01)
        raise AssertionError(
            f"no matching event within {seconds} s among {len(self.events)}; "
            f"latest: {self.events[-1] if self.events else None}"
        )

    async def close(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


def state(event: StepEvent) -> tuple:
    """What the engine holds, as an event shows it."""
    return (
        event.paused,
        event.step_interval_ms,
        event.num_free_blocks,
        sorted(event.cached_free_blocks),
        [(r.req_id, r.status, r.num_computed_tokens, r.block_ids) for r in event.running],
        [(r.req_id, r.status, r.num_computed_tokens, r.block_ids) for r in event.waiting],
    )


async def matches_engine(watcher: Watcher, pred=lambda e: True) -> StepEvent:
    """Within 1 s the engine's state satisfies `pred` and the latest published event equals it."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 1.0
    while True:
        truth = await watcher.llm.snapshot()  # the engine's state, now
        latest = watcher.events[-1] if watcher.events else None
        if pred(truth) and latest is not None and not latest.is_snapshot and state(latest) == state(truth):
            return latest
        if loop.time() > deadline:
            raise AssertionError(f"the latest event does not equal the engine's state:\n{latest}\n{truth}")
        await asyncio.sleep(0.01)


def ids(prompt_len: int, seed: int) -> list[int]:
    return [2] + [(seed * 7 + i) % 400 + 4 for i in range(prompt_len - 1)]


async def test_every_change_reaches_subscribers_at_once(llm):
    watcher = Watcher(llm)
    try:
        await watcher.latest_within(5.0, lambda e: e.is_snapshot)  # greeted
        greedy = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)

        await llm.pause()
        await matches_engine(watcher, lambda e: e.paused)

        # A request added while paused: queued, announced with its prompt.
        stream = llm.generate(ids(20, 1), greedy, "held")
        first = asyncio.create_task(anext(stream))
        await matches_engine(watcher, lambda e: [r.req_id for r in e.waiting] == ["held"])
        assert any(a.req_id == "held" and len(a.prompt_token_ids) == 20 for w in watcher.events for a in w.added)

        # Aborted while paused: gone, with the reason.
        await llm.abort("held")
        await matches_engine(watcher, lambda e: not e.waiting)
        assert any(f.req_id == "held" and f.reason == "abort" for e in watcher.events for f in e.finished)
        assert (await first).outputs[0].finish_reason == "abort"

        # One that can never fit the pool is rejected with its reason, at once.
        too_big = SamplingParams(temperature=0, max_tokens=400, ignore_eos=True)  # 420 tokens: never fits
        outs = [o async for o in llm.generate(ids(20, 2), too_big, "huge")]
        assert outs[-1].outputs[0].finish_reason == "rejected"
        # The output and the event travel apart: the event may land just after the output.
        await watcher.any_within(1.0, lambda e: any(r.req_id == "huge" for r in e.rejected))
        await matches_engine(watcher)
        rejected = [r for e in watcher.events for r in e.rejected if r.req_id == "huge"]
        assert len(rejected) == 1 and "KV blocks" in rejected[0].detail

        # Slow motion and resume.
        await llm.set_step_interval(0.05)
        await matches_engine(watcher, lambda e: e.step_interval_ms == 50.0)
        await llm.set_step_interval(0)
        await llm.resume()
        await matches_engine(watcher, lambda e: not e.paused and e.step_interval_ms == 0.0)

        # A finished request leaves the queues and frees its blocks in the event that ends it.
        done = [o async for o in llm.generate(ids(40, 3), greedy, "full")]
        assert done[-1].outputs[0].finish_reason == "length"
        ev = await matches_engine(watcher, lambda e: not e.running and e.num_free_blocks == NUM_BLOCKS)
        assert len(ev.cached_free_blocks) >= 2  # its full blocks stay cached

        # A prefix-cache reset.
        assert await llm.reset_prefix_cache() is True
        await matches_engine(watcher, lambda e: e.cached_free_blocks == [])
    finally:
        await llm.resume()
        await watcher.close()


async def test_a_stop_string_ended_request_leaves_the_engine_at_once(llm):
    watcher = Watcher(llm)
    try:
        await watcher.latest_within(5.0, lambda e: e.is_snapshot)
        await llm.set_step_interval(0.3)  # slow: the engine would not step again for a while
        params = SamplingParams(temperature=0, max_tokens=200, ignore_eos=True, stop=["e"])
        outs = [o async for o in llm.generate("The engine", params, "stopper")]
        assert outs[-1].outputs[0].finish_reason == "stop"
        # The client saw the stop string and aborted it: the engine reports that within a second.
        ev = await matches_engine(watcher, lambda e: all(r.req_id != "stopper" for r in e.running + e.waiting))
        assert ev.num_free_blocks == NUM_BLOCKS
    finally:
        await llm.set_step_interval(0)
        await watcher.close()


async def test_events_say_what_happened_in_a_step(llm):
    watcher = Watcher(llm)
    try:
        await watcher.latest_within(5.0, lambda e: e.is_snapshot)
        params = SamplingParams(temperature=0, max_tokens=3, ignore_eos=True)
        # 300 tokens with a 256-token budget: admitted with a chunk, then the rest.
        outs = [o async for o in llm.generate(ids(300, 4), params, "long")]
        tokens = outs[-1].outputs[0].token_ids
        await matches_engine(watcher, lambda e: not e.running)
        steps = [e for e in watcher.events if e.is_step and "long" in e.scheduled]
        admitted = [a for e in steps for a in e.admitted if a.req_id == "long"]
        assert len(admitted) == 1 and admitted[0].num_new_tokens == 256 and not admitted[0].resumed
        chunks = [c for e in steps for c in e.chunks if c.req_id == "long"]
        assert [(c.num_tokens, c.num_remaining) for c in chunks] == [(256, 44), (44, 0)]
        generated = [t for e in steps for t in e.new_token_ids.get("long", [])]
        assert generated == tokens  # the events carry every token the request generated
    finally:
        await watcher.close()
