"""`enginetui replay` of an `attach --vllm --record` file: the replay's own keys, title, footer and
help (not the live watch's), moving item by item both ways, jumping to a time, and idle stretches
played short unless --keep-idle. On the recorded burst against a real vLLM 0.32."""

import lzma
from pathlib import Path

import pytest

from enginetui.replay.controls import MAX_IDLE_S, offsets_for_play
from enginetui.vllm_watch import prometheus as m
from enginetui.vllm_watch.prometheus import MetricsSample
from enginetui.vllm_watch.recording import CallItem, MetricsItem, apply_item, read_watch_recording
from enginetui.vllm_watch.replay import REPLAY_ONLY, WatchReplayApp, idle_after
from enginetui.vllm_watch.state import WatchState
from tests.support.pilot import until
from tests.vllm_watch.watch_pilot import shown

BURST = Path(__file__).parent / "fixtures" / "opt-tiny-burst" / "burst.etrec.xz"  # 64 requests through the proxy
SIZE = (120, 40)


@pytest.fixture(scope="module")
def burst(tmp_path_factory):
    path = tmp_path_factory.mktemp("replay") / "burst.etrec"
    path.write_bytes(lzma.decompress(BURST.read_bytes()))
    return read_watch_recording(str(path))


def reading(t: float, running: int, waiting: int = 0) -> MetricsItem:
    return MetricsItem(MetricsSample(time=t, values={m.RUNNING: {"0": running}, m.WAITING: {"0": waiting}}))


def test_idle_stretches_play_short_unless_kept():
    """47 s of an idle vLLM before a request, as a recording's first minute often is: played, 2 s."""
    items = [
        *(reading(float(t), 0) for t in range(48)),  # idle, a reading a second
        CallItem("proxy_arrived", ["POST", "/v1/completions", b"{}", "127.0.0.1", 47.5], 47.5),
        reading(48.0, 1),
        reading(49.0, 0, waiting=1),
        reading(50.0, 1),
        CallItem("proxy_ended", ["p1", "", 50.5], 50.5),
        reading(51.0, 0),
        reading(60.0, 0),
    ]
    idle = idle_after(items)
    assert idle[:48] == [True] * 48 and idle[48:53] == [False] * 5 and idle[53:] == [True] * 2  # busy to 51.0
    times = [item.sample.time if isinstance(item, MetricsItem) else item.t for item in items]
    played = offsets_for_play(times, idle)
    assert played[48] == MAX_IDLE_S  # the request arrives 2 s in, not 47.5
    assert played[53] - played[48] == pytest.approx(3.5)  # while it runs: as recorded
    assert played[-1] - played[53] == pytest.approx(MAX_IDLE_S)  # the idle end, shortened too
    assert offsets_for_play(times, idle, max_idle_s=None) == [t - times[0] for t in times]  # --keep-idle


def folded(recording, count: int) -> WatchState:
    state = WatchState(recording.header.url, recording.header.kv_endpoint)
    for item in recording.items[:count]:
        apply_item(state, item)
    return state


def offered(app) -> set[str]:
    return {b.binding.action for b in app.active_bindings.values() if b.enabled and b.binding.show}


async def test_a_watch_recording_replays_with_replay_keys_title_and_footer(burst):
    app = WatchReplayApp(burst)
    items = len(burst.items)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.shown > 0)
        assert app.playing  # it plays from the start
        assert shown(app, "#watch-title").startswith("replay · vLLM · ● /metrics")
        assert not app.query_one("#prompt-bar").display
        assert {"play", "move(1)", "move(-1)", "speed(-1)", "speed(1)", "jump", "quit"} <= offered(app)
        assert not offered(app) & {"burst", "reset_cache"}
        await pilot.press("space")
        assert not app.playing
        await pilot.press("home", "right", "right", "right", "right", "left")
        assert app.shown == 3
        again = folded(burst, 3)
        assert [r.req_id for r in app.state.requests.values()] == [r.req_id for r in again.requests.values()]
        assert app.state.latest == again.latest
        await pilot.press("end")
        assert app.shown == items and len(app.state.requests) == 64
        assert "item 3423/3423" in shown(app, "#replay-bar")
        await pilot.press("g", *"3.5", "enter")
        expected = sum(t - burst.times()[0] <= 3.5 for t in burst.times())
        assert app.shown == expected and 0 < expected < items
        await pilot.press("x", "ctrl+b")  # a letter types nothing; a live key says why it does nothing
        await until(pilot, lambda: any(REPLAY_ONLY in n.message for n in app._notifications))
        assert app.shown == expected
        await pilot.press("question_mark")
        keys_listed = [key for key, _ in app.screen.keys]
        assert "space" in keys_listed[0] and "Send" not in str(app.screen.keys)
        await pilot.press("escape", "q")


@pytest.mark.slow  # plays the whole recording
async def test_playing_reaches_the_end_and_stops(burst):
    app = WatchReplayApp(burst)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("plus", "plus", "plus")  # 8x: the 6.5 s recording in under a second
        await until(pilot, lambda: app.shown == len(burst.items) and not app.playing, timeout=30)
        assert len(app.state.requests) == 64 and "⏸ replay" in shown(app, "#replay-bar")
