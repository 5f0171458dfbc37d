"""`enginetui replay` of a recording of `attach --vllm URL`: vLLM's column (/metrics, latency, prefix tree, the
proxy's requests, the INFERRED panel) rebuilt from the recording's V frames at the event shown, as it was live.
On the recorded 64-request burst through the proxy (a real vLLM 0.32)."""

import lzma
import time
from pathlib import Path

import msgspec
import pytest

from enginetui.replay.cli import open_session
from enginetui.replay.with_vllm import RecordedVllm, VllmReplayTUI, replay_app
from enginetui.vllm_probe.recording import ProbeRecording
from enginetui.vllm_watch import vllm_record
from enginetui.vllm_watch.burst import burst_items
from enginetui.vllm_watch.prometheus import parse_metrics
from enginetui.vllm_watch.state import WatchState
from tests.support.pilot import until
from tests.vllm_probe.fake_probe import read_events
from tests.vllm_watch.watch_pilot import shown

BURST = Path(__file__).parent / "fixtures" / "opt-tiny-burst"
SIZE = (160, 48)


@pytest.fixture
def burst_file(tmp_path) -> str:
    path = tmp_path / "burst.etrec"
    path.write_bytes(lzma.decompress((BURST / "burst.etrec.xz").read_bytes()))
    return str(path)


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def at_event(burst_file: str, share: float) -> VllmReplayTUI:
    session, notes = open_session(burst_file)
    app = replay_app(session, notes=notes, start=int(share * (len(session) - 1)))
    assert isinstance(app, VllmReplayTUI)
    return app


async def test_the_column_at_each_event_is_the_watchers_state_then_both_ways(burst_file):
    session, _ = open_session(burst_file)
    recorded = RecordedVllm(session.recording)
    limits, items = burst_items(BURST)
    befores = [before for before, _ in session.recording.vllm_items()]
    middle = len(session) // 2
    live = WatchState.from_recorded([item for item, before in zip(items, befores) if before <= middle + 1])
    at_middle = recorded.at(middle)
    assert at_middle.latest.time == live.latest.time and len(at_middle.requests) == len(live.requests)
    assert [v.status for v in at_middle.requests.values()] == [v.status for v in live.requests.values()]
    assert recorded.at(len(session) - 1).proxied == 64
    assert recorded.at(middle).latest.time == live.latest.time  # back again: folded anew
    assert (recorded.state.limits.max_num_seqs, recorded.state.limits.max_num_batched_tokens) == (
        limits.max_num_seqs,
        limits.max_num_batched_tokens,
    )  # from the step events: the command line's limits are not recorded
    assert recorded.state.rebuild is not None and recorded.state.rebuild.checks  # the INFERRED panel's agreement


async def test_the_replay_shows_vllms_column_and_moves_it_with_the_events(burst_file):
    app = at_event(burst_file, 0.4)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.vllm.latest is not None)
        status = shown(app, "#vllm-status")
        assert "/metrics" in status and "opt-tiny" in status
        assert "INFERRED (rebuilt from outside): running" in shown(app, "#vllm-oracle")
        assert "/metrics: running" in shown(app, "#vllm-oracle")
        assert "of 32 blocks" in shown(app, "#vllm-metrics")
        assert "TTFT" in shown(app, "#vllm-latency")
        assert " p64 STREAMING " in shown(app, "#vllm-requests")  # the proxy's requests, as they were then
        # what the recording knows of vLLM's model (its name or path, context, pool), nothing it does not
        model = shown(app, "#model")
        assert model.startswith(app.session.recording.header.engine.model_name) and "/opt-tiny" in model
        assert "context 512 tok · pool 992 tok" in model and "params" not in model and "B/tok" not in model
        live_before = sum(v.active for v in app.vllm.requests.values())
        assert live_before
        await pilot.press("end")
        await until(pilot, lambda: app.index == len(app.session) - 1)
        assert not any(v.active for v in app.vllm.requests.values()) and app.vllm.proxied == 64
        assert "64 passed" in shown(app, "#vllm-status")


def test_snapshot_of_the_replay_with_vllms_column(snap_compare, burst_file):
    assert snap_compare(at_event(burst_file, 0.4), terminal_size=SIZE)


def test_a_probe_recording_scores_each_reading_against_the_probes_events_again(tmp_path):
    """A recording of `attach --vllm URL --probe ADDR`: the replay's exact panel scores each recorded /metrics
    reading against the probe's state then, as the live dashboard did."""
    events = read_events()
    path = tmp_path / "probe.etrec"
    recording = ProbeRecording(path, "tests", None, None)
    watcher = WatchState("http://127.0.0.1:8000", None)
    watcher.start_recording(lambda item: recording.write_vllm(vllm_record.encode(item)))
    readings = 0
    for i, event in enumerate(events):
        recording.write(msgspec.msgpack.encode(event), event)
        if i % 24 == 23:  # vLLM's gauges as this step left them, read just after it
            used = event.num_blocks - event.num_free_blocks
            text = (
                f'vllm:num_requests_running{{engine="0"}} {len(event.running)}\n'
                f'vllm:num_requests_waiting{{engine="0"}} {len(event.waiting)}\n'
                f'vllm:kv_cache_usage_perc{{engine="0"}} {used / event.num_blocks}\n'
            )
            watcher.apply_metrics(parse_metrics(text, event.time + 1e-6))
            readings += 1
    recording.close()
    session, _ = open_session(str(path))
    recorded = RecordedVllm(session.recording)
    assert recorded.exact and recorded.at(len(session) - 1).latest is not None
    assert recorded.truth.metrics.count == readings > 0 and recorded.truth.metrics.agreeing == readings
    recorded.at(len(session) // 2)  # back: scored again from the start, up to there
    assert 0 < recorded.truth.metrics.count < readings
