"""An idle vLLM is read less often, a busy one every poll_s, and work seen elsewhere (a KV event
batch, a prompt sent) brings the busy pace back at once. Counted on a simulated clock, never timed."""

import asyncio

import pytest

from enginetui.vllm_watch import prometheus as m
from enginetui.vllm_watch.feed import ServerFeed
from enginetui.vllm_watch.poll_pacing import IDLE_BACKOFF, PollPacing
from enginetui.vllm_watch.prometheus import MetricsSample
from enginetui.vllm_watch.state import ServerInfo, WatchState

IDLE = {m.RUNNING: 0.0, m.WAITING: 0.0, m.KV_USAGE: 0.0, m.REQUESTS_DONE: 3.0, m.GENERATION_TOKENS: 96.0}


def sample(t: float, **changes: float) -> MetricsSample:
    values = {**IDLE, **{getattr(m, k): v for k, v in changes.items()}}
    return MetricsSample(time=t, values={name: {"0": v} for name, v in values.items()})


class SimulatedServer:
    """Answers /metrics from a script of the server's figures over (simulated) time."""

    def __init__(self, clock: list[float], script) -> None:
        self.clock = clock  # [now], advanced by the feed's waits
        self.script = script  # now -> the figures' changes at that time
        self.readings: list[float] = []  # when each reading was taken

    async def metrics(self) -> MetricsSample:
        now = self.clock[0]
        self.readings.append(now)
        return sample(now, **self.script(now))

    async def scheduler_limits(self) -> None:
        return None  # no /server_info: not a dev-mode server


async def run_feed(script, seconds: float, wake_at: float | None = None) -> tuple[SimulatedServer, WatchState]:
    """The feed's poll loop for `seconds` of simulated time (each wait advances the clock)."""
    clock = [0.0]  # (each wait is shortened by the real time a reading took: a fraction of a millisecond)
    server = SimulatedServer(clock, script)
    state = WatchState("http://x:1", None)
    state.set_server(ServerInfo(model="m", root="m", max_model_len=None))  # the model is known: only /metrics is read
    feed = ServerFeed(state, server, lambda coro: None, kv_events=None, poll_s=1.0)

    async def simulated_wait(s: float) -> None:
        if wake_at is not None and clock[0] < wake_at <= clock[0] + s:
            clock[0] = wake_at
            feed.wake()  # e.g. a prompt sent from the dashboard
            return
        clock[0] += s
        if clock[0] > seconds:
            raise asyncio.CancelledError

    feed.pacing.wait = simulated_wait
    with pytest.raises(asyncio.CancelledError):
        await feed.poll_metrics()
    assert feed.num_readings == len(server.readings)
    return server, state


async def test_an_idle_server_is_read_less_and_less_often_down_to_the_backoff():
    server, state = await run_feed(lambda now: {}, 60.0)
    gaps = [round(b - a, 1) for a, b in zip(server.readings, server.readings[1:])]
    assert gaps[:4] == [1.0, 2.0, 4.0, 8.0] and set(gaps[4:]) == {IDLE_BACKOFF * 1.0}
    assert len(server.readings) == 10  # in 60 s, against 61 at one a second
    assert state.version <= 2 * len(server.readings)  # so are the redraws: the state moves only per reading


async def test_work_brings_the_busy_pace_back_at_the_next_reading():
    def script(now):  # idle, then a request runs from t=30 to t=40 (a token a second), then idle
        if now < 30:
            return {}
        if now < 40:
            return {"RUNNING": 1.0, "KV_USAGE": 0.1, "GENERATION_TOKENS": 96 + now - 30}
        return {"GENERATION_TOKENS": 106.0}

    server, _ = await run_feed(script, 60.0)
    busy = [t for t in server.readings if 30 <= t < 40]
    assert busy and busy[0] <= 30 + IDLE_BACKOFF  # seen within one idle wait
    assert [round(b - a, 1) for a, b in zip(busy, busy[1:])] == [1.0] * (len(busy) - 1)  # then read every second


async def test_a_wake_cuts_the_idle_wait_short():
    server, _ = await run_feed(lambda now: {}, 60.0, wake_at=20.5)
    assert 20.5 in server.readings  # read as soon as woken
    after = [t for t in server.readings if t > 20.5]
    assert after[0] == pytest.approx(
        21.5, abs=0.05
    )  # and at the busy pace again (the figures did not move: it backs off anew)


def test_a_failed_reading_keeps_the_busy_pace():
    pacing = PollPacing(1.0)
    for _ in range(5):
        pacing.after_reading(sample(0.0))
    assert pacing.interval_s == IDLE_BACKOFF
    assert pacing.after_reading(None) == 1.0  # the link's state stays fresh


async def test_wait_returns_at_once_when_woken():
    pacing = PollPacing(1.0)
    asyncio.get_running_loop().call_soon(pacing.wake)
    await asyncio.wait_for(pacing.wait(3600.0), timeout=30.0)  # woken, not timed out
    assert pacing.after_reading(sample(0.0)) == 1.0


async def test_a_wake_during_a_reading_asks_for_another_at_once():
    # the reading began before the work it may have missed (a prompt sent through the proxy while
    # /metrics was being read): the wait after it must not swallow that wake
    pacing = PollPacing(120.0)
    pacing.reading_starts()
    pacing.wake()  # while the reading is under way
    assert pacing.after_reading(sample(0.0)) == 120.0
    await asyncio.wait_for(pacing.wait(3600.0), timeout=30.0)  # no 120 s wait: read again now
    pacing.reading_starts()  # that next reading answers it
    pacing.after_reading(sample(0.0))
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(pacing.wait(3600.0), timeout=0.1)  # and nothing else is pending
