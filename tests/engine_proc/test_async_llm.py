"""AsyncLLM against one shared engine, in a child process and in-process."""

import asyncio
import os

import psutil
import pytest
import pytest_asyncio

from enginetui.core.engine.async_llm import AsyncLLM
from enginetui.core.engine.events import StepEvent
from enginetui.core.sampling_params import SamplingParams
from tests.engine_proc.engine_args import engine_args

pytestmark = [pytest.mark.timeout(90), pytest.mark.asyncio(loop_scope="module")]


def greedy(max_tokens: int, **kw) -> SamplingParams:
    return SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True, **kw)


def prompt(i: int = 0) -> str:
    return ["The engine", "Once upon a time there was", "A block table maps"][i % 3]


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=[True, False], ids=["multiproc", "inproc"])
async def llm(request, engine_model_dir):
    engine = AsyncLLM.from_engine_args(multiprocess=request.param, **engine_args(engine_model_dir))
    yield engine
    engine.shutdown()


@pytest_asyncio.fixture(loop_scope="module", autouse=True)
async def clean_engine(llm):
    """Every test starts and leaves the shared engine running and empty."""
    yield
    await llm.resume()
    for req_id in list(llm._queues):
        await llm.abort(req_id)
    await wait_idle(llm)


async def wait_idle(llm: AsyncLLM, timeout: float = 10.0) -> StepEvent:
    """Until the engine holds no requests; returns that snapshot (or the last one seen)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        snap = await llm.snapshot()
        if (not snap.running and not snap.waiting) or asyncio.get_running_loop().time() > deadline:
            return snap
        await asyncio.sleep(0.02)


async def wait_waiting(llm: AsyncLLM, req_id: str) -> None:
    """Until the request is in the engine's waiting queue (generate() sends it on first iteration)."""
    for _ in range(500):
        if any(r.req_id == req_id for r in (await llm.snapshot()).waiting):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{req_id} never reached the engine")


async def collect(agen) -> list:
    return [out async for out in agen]


class Subscriber:
    """Collects events in a background task; `ready()` waits for the greeting snapshot."""

    def __init__(self, llm: AsyncLLM) -> None:
        self.events: list[StepEvent] = []
        self._agen = llm.events()
        self._got: asyncio.Event = asyncio.Event()
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        async for event in self._agen:
            self.events.append(event)
            self._got.set()

    async def ready(self) -> StepEvent:
        await asyncio.wait_for(self._got.wait(), 10)
        assert self.events[0].is_snapshot
        return self.events[0]

    async def wait_for(self, pred, timeout: float = 10.0) -> StepEvent:
        async def poll():
            while True:
                for ev in self.events:
                    if pred(ev):
                        return ev
                await asyncio.sleep(0.01)

        return await asyncio.wait_for(poll(), timeout)

    async def close(self) -> None:
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass


async def _read_until(events, got: list, pred) -> None:
    """Append events from the async iterator to `got` until one satisfies `pred`."""
    async for ev in events:
        got.append(ev)
        if pred(ev):
            return


def check_event(ev: StepEvent) -> None:
    """The event agrees with itself and the block pool (prefix caching is off)."""
    held = sum(len(r.block_ids) for r in ev.running) + sum(len(r.block_ids) for r in ev.waiting)
    assert held + ev.num_free_blocks == ev.num_blocks, ev
    assert sum(ev.scheduled.values()) == ev.num_scheduled_tokens
    assert ev.num_prefill_tokens + ev.num_decode_tokens == ev.num_scheduled_tokens
    assert ev.num_scheduled_tokens <= ev.token_budget
    for r in ev.running:
        assert len(r.block_ids) * ev.block_size >= r.num_computed_tokens
        assert r.num_computed_tokens <= r.num_tokens


async def test_streaming_order_and_completeness(llm):
    streams = [llm.generate(prompt(i), greedy(6 + i), f"stream-{i}") for i in range(3)]
    results = await asyncio.gather(*(collect(s) for s in streams))
    for i, outs in enumerate(results):
        assert [o.finished for o in outs] == [False] * (len(outs) - 1) + [True]
        for n, out in enumerate(outs, start=1):
            assert len(out.outputs[0].token_ids) == n  # one token per output, in order
            assert outs[-1].outputs[0].token_ids[:n] == out.outputs[0].token_ids
        final = outs[-1].outputs[0]
        assert len(final.token_ids) == 6 + i and final.finish_reason == "length"
        assert "".join(o.new_text for o in outs) == final.text
        assert final.text  # the tiny model does produce text


async def test_invalid_input_raises_before_the_engine(llm):
    before = (await llm.snapshot()).step
    with pytest.raises(ValueError, match="empty"):
        await collect(llm.generate([], greedy(4), "bad-1"))
    with pytest.raises(ValueError, match="max_model_len"):
        await collect(llm.generate([1] * (llm.info.max_model_len + 10), greedy(4), "bad-2"))
    snap = await llm.snapshot()
    assert snap.step == before and not snap.waiting and not snap.running


async def test_abort_frees_blocks_in_an_event_at_once(llm):
    sub = Subscriber(llm)
    await sub.ready()
    await llm.pause()
    stream = llm.generate(prompt(1), greedy(100), "to-abort")
    first = asyncio.create_task(stream.__anext__())
    await wait_waiting(llm, "to-abort")
    for _ in range(3):
        await llm.step_once()
    await first
    running = await sub.wait_for(lambda e: any(r.req_id == "to-abort" for r in e.running))
    held = next(r for r in running.running if r.req_id == "to-abort").block_ids
    assert held
    seen = len(sub.events)
    await llm.abort("to-abort")
    rest = await collect(stream)
    assert rest[-1].finished and rest[-1].outputs[0].finish_reason == "abort"
    # Paused, so no step runs: the abort is published at once, as an update event.
    ev = await sub.wait_for(lambda e: e.kind == "update" and sub.events.index(e) >= seen)
    assert all(r.req_id != "to-abort" for r in ev.running + ev.waiting)
    assert ev.num_free_blocks == ev.num_blocks
    assert set(held) <= set(ev.blocks_freed)
    assert [(f.req_id, f.reason) for f in ev.finished] == [("to-abort", "abort")]
    check_event(ev)
    await sub.close()


async def test_events_consistent_with_scheduler_every_step(llm):
    sub, other = Subscriber(llm), Subscriber(llm)  # several subscribers at once
    await other.ready()
    greeting = await sub.ready()
    streams = [llm.generate(prompt(i), greedy(5 + 3 * i), f"ev-{i}") for i in range(3)]
    await asyncio.gather(*(collect(s) for s in streams))
    last = await sub.wait_for(lambda e: any(f.req_id == "ev-2" for f in e.finished))
    await other.wait_for(lambda e: e.step == last.step and e.is_step)
    steps = [e for e in sub.events if e.is_step]  # an "update" (requests added between steps) repeats its step
    assert [e.step for e in other.events if e.is_step and e.step > greeting.step] == [e.step for e in steps]
    await other.close()
    assert [e.step for e in steps] == list(range(greeting.step + 1, last.step + 1))  # every step, no drops
    assert all(e.num_dropped_events == 0 for e in steps)
    for ev in steps:
        check_event(ev)
        if ev.is_step and ev.num_scheduled_tokens:  # the model ran on the CPU, on the threads it says
            assert 1 <= ev.compute_threads <= llm.info.cpu_threads <= os.cpu_count(), ev.compute_threads
    finished = {f.req_id: f for e in steps for f in e.finished}
    assert {"ev-0", "ev-1", "ev-2"} <= set(finished)
    assert finished["ev-2"].num_output_tokens == 11 and finished["ev-2"].reason == "length"
    await sub.close()


async def test_pause_step_resume(llm):
    await llm.pause()
    s0 = await llm.snapshot()
    assert s0.paused and s0.is_snapshot
    stream = llm.generate(prompt(0), greedy(4), "paused")
    nxt = asyncio.create_task(stream.__anext__())
    await wait_waiting(llm, "paused")
    await asyncio.sleep(0.3)
    s1 = await llm.snapshot()
    assert s1.step == s0.step  # no steps while paused
    assert [r.req_id for r in s1.waiting] == ["paused"] and not nxt.done()
    await llm.step_once()
    s2 = await llm.snapshot()
    assert s2.step == s0.step + 1
    assert [r.req_id for r in s2.running] == ["paused"]
    out = await asyncio.wait_for(nxt, 5)
    assert len(out.outputs[0].token_ids) == 1
    await llm.step_once()
    assert (await llm.snapshot()).step == s0.step + 2
    await asyncio.sleep(0.2)
    assert (await llm.snapshot()).step == s0.step + 2
    await llm.resume()
    rest = await asyncio.wait_for(collect(stream), 10)
    assert rest[-1].finished and len(rest[-1].outputs[0].token_ids) == 4
    assert not (await llm.snapshot()).paused


async def test_slow_motion_spaces_steps_and_keeps_serving(llm):
    """With a step interval, steps start at least that far apart; aborts and controls are still
    answered while a step is held back."""
    sub = Subscriber(llm)
    await sub.ready()
    await llm.set_step_interval(0.15)
    try:
        assert (await llm.snapshot()).step_interval_ms == pytest.approx(150)
        outs = await asyncio.wait_for(collect(llm.generate(prompt(0), greedy(4), "slow")), 10)
        assert len(outs[-1].outputs[0].token_ids) == 4
        await sub.wait_for(lambda ev: any(e.req_id == "slow" for e in ev.finished))  # events travel apart
        steps = [e for e in sub.events if not e.is_snapshot and "slow" in e.scheduled]
        assert len(steps) == 4
        # Pacing spaces step starts; a start seen from the event can lag by thread scheduling, so
        # the span over the three intervals is checked (a lag at either end is only counted once).
        starts = [e.time - (e.sched_ms + e.exec_ms + e.update_ms) / 1e3 for e in steps]
        assert starts[-1] - starts[0] >= 3 * 0.15 - 0.02

        await llm.set_step_interval(10.0)  # the next step is 10 s away once one has run
        stream = llm.generate(prompt(1), greedy(8), "held")
        first = await asyncio.wait_for(stream.__anext__(), 5)  # its first step runs at once
        assert len(first.outputs[0].token_ids) == 1
        await llm.abort("held")  # served while the second step is held back
        rest = await asyncio.wait_for(collect(stream), 5)
        assert rest[-1].finished and rest[-1].outputs[0].finish_reason == "abort"
    finally:
        await llm.set_step_interval(0)
        await sub.close()
    assert (await llm.snapshot()).step_interval_ms == 0
    for bad in (-1, 10.5, "fast", True, float("nan")):
        with pytest.raises(ValueError, match="step interval"):
            await llm.set_step_interval(bad)


async def test_a_subscriber_that_falls_behind_loses_only_its_own_events(llm):
    """One subscriber reads every event while another stops reading: the first misses nothing;
    the second, reading again, is brought level with the engine and told how many it missed."""
    live = Subscriber(llm)
    await live.ready()
    lagging = llm.events()
    greeting = await asyncio.wait_for(lagging.__anext__(), 10)
    assert greeting.is_snapshot
    outs = await asyncio.wait_for(collect(llm.generate(prompt(1), greedy(300), "long")), 60)
    assert len(outs[-1].outputs[0].token_ids) == 300
    last = await live.wait_for(lambda ev: any(e.req_id == "long" for e in ev.finished))
    steps = [e.step for e in live.events if not e.is_snapshot]
    assert steps == list(range(steps[0], last.step + 1))  # every step, none missed
    assert all(e.num_dropped_events == 0 for e in live.events)
    await live.close()

    # The lagging subscriber reads again: what was queued for it, then (the engine being quiet) a
    # snapshot of the state it lost, which counts the events it never got.
    got = []
    await asyncio.wait_for(_read_until(lagging, got, lambda ev: ev.is_snapshot and ev.step >= last.step), 10)
    step_events = [e for e in got if not e.is_snapshot]
    assert step_events and step_events[-1].step < last.step  # it lost the later events of "long"
    caught_up = got[-1]
    assert caught_up.num_dropped_events > 0 and all(r.req_id != "long" for r in caught_up.running)
    assert 1 + len(got) + sum(e.num_dropped_events for e in got) == caught_up.seq - greeting.seq + 1
    await lagging.aclose()


async def test_late_subscriber_gets_a_snapshot_of_running_requests(llm):
    stream = llm.generate(prompt(2), greedy(150), "long")
    await stream.__anext__()
    await llm.pause()
    sub = Subscriber(llm)
    greeting = await sub.ready()
    assert greeting.is_snapshot and greeting.paused
    assert [r.req_id for r in greeting.running] == ["long"]
    assert greeting.running[0].block_ids and greeting.running[0].num_output_tokens >= 1
    snap = await llm.snapshot()
    assert [r.req_id for r in snap.running] == ["long"]
    await sub.close()
    await stream.aclose()  # leaving the stream aborts the request
    await llm.resume()
    snap = await wait_idle(llm)
    assert not snap.running and not snap.waiting, snap


async def test_cancel_or_break_aborts_in_the_engine(llm):
    await llm.pause()  # keep both requests running until their consumers leave
    got_one = asyncio.Event()

    async def consume():
        async for _ in llm.generate(prompt(0), greedy(200), "cancelled"):
            got_one.set()

    task = asyncio.create_task(consume())
    await wait_waiting(llm, "cancelled")
    await llm.step_once()
    await asyncio.wait_for(got_one.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    async def first_then_break():
        async for _ in llm.generate(prompt(1), greedy(200), "broken"):
            break  # leaving the loop early

    leaver = asyncio.create_task(first_then_break())
    await wait_waiting(llm, "broken")
    await llm.step_once()
    await asyncio.wait_for(leaver, 5)
    snap = await wait_idle(llm)
    assert snap.paused and snap.step >= 2
    assert not snap.running and not snap.waiting, snap


async def test_stop_string_aborts_in_the_engine(llm):
    full = (await collect(llm.generate(prompt(1), greedy(30), "full")))[-1].outputs[0]
    assert len(full.text) >= 8  # the seeded tiny model's text, long enough to stop inside
    stop = full.text[4:7]
    outs = await collect(llm.generate(prompt(1), greedy(30, stop=[stop]), "stopped"))
    final = outs[-1].outputs[0]
    assert final.finish_reason == "stop" and final.stop_reason == stop
    assert final.text == full.text[: full.text.index(stop)]
    snap = await wait_idle(llm)
    assert not snap.running and not snap.waiting, snap


async def test_idle_engine_uses_little_cpu(llm):
    if llm.engine_pid is None:
        pytest.skip("in-process engine")
    proc = psutil.Process(llm.engine_pid)
    await asyncio.sleep(0.3)
    proc.cpu_percent(None)
    await asyncio.sleep(1.0)
    assert proc.cpu_percent(None) < 10.0


def _context_switches(pid: int) -> int:
    """Context switches of every thread of a process so far (each is a wake, or a preemption).
    psutil's num_ctx_switches() counts the main thread's only on Linux."""
    total = 0
    for thread in psutil.Process(pid).threads():
        with open(f"/proc/{pid}/task/{thread.id}/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        total += int(fields["voluntary_ctxt_switches"]) + int(fields["nonvoluntary_ctxt_switches"])
    return total


async def test_idle_engine_threads_sleep(llm):
    """No thread of an idle EngineCore wakes on a timer (core/engine/wake_queue.py): on a machine whose
    cores a neighbour's compute threads fill, each wake would stall one of its steps."""
    if llm.engine_pid is None:
        pytest.skip("in-process engine")
    await asyncio.sleep(0.3)
    before = _context_switches(llm.engine_pid)
    await asyncio.sleep(1.5)
    assert _context_switches(llm.engine_pid) - before <= 2  # a thread waking on a timer would wake many times
