"""`enginetui attach --vllm URL --record FILE`: the session kept, replayed into the same panels, exported."""

import json

import httpx
import pytest

from enginetui.cli import main
from enginetui.core.record.format import RecordingError
from enginetui.vllm_watch.recording import MetricsItem, apply_item, is_watch_recording, read_watch_recording
from enginetui.vllm_watch.replay import WatchReplayApp
from enginetui.vllm_watch.state import WatchState
from tests.support.pilot import until
from tests.vllm_watch import recorded
from tests.vllm_watch.watch_pilot import shown, step_time, watch

SIZE = (150, 50)


def cached(state: WatchState) -> set:
    return {k for k, b in state.caches.ranks[0].blocks.items() if b.cached}


def folded(path) -> WatchState:
    recording = read_watch_recording(path)
    state = WatchState(recording.header.url, recording.header.kv_endpoint)
    for item in recording.items:
        apply_item(state, item)
    return state


@pytest.fixture
async def session(fake, tmp_path):
    """A recorded session: part of the recorded vLLM run, a prompt typed, one through the proxy."""
    path = tmp_path / "session.etrec"
    app = watch(fake, proxy=("127.0.0.1", 0), record=str(path))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.state.proxy_url and app.state.server and app.state.caches.decode is not None)
        fake.play_until(step_time("a burst"))
        await until(pilot, lambda: app.state.caches.ranks and app.state.caches.ranks[0].last_seq == fake.last_seq)
        app.submit("Return the", app.query_one("PromptBar").settings)
        async with httpx.AsyncClient(timeout=10) as http:
            r = await http.post(
                f"{app.state.proxy_url}/v1/completions",
                json={"model": "opt-tiny", "prompt": "The list", "max_tokens": 24, "stream": True},
            )
            assert r.status_code == 200
        await until(
            pilot, lambda: len(app.state.requests) == 2 and not any(v.active for v in app.state.requests.values())
        )
        await until(pilot, lambda: app.state.latest is not None and app.state.latest.time > 0)
        live = app.state
    return path, live


async def test_a_recorded_session_folds_back_into_the_same_state(session):
    path, live = session
    assert is_watch_recording(path)
    again = folded(path)
    assert cached(again) == cached(live) and again.caches.ranks[0].last_seq == live.caches.ranks[0].last_seq
    assert [(v.req_id, v.status, v.text, v.tokens(), v.source) for v in again.requests.values()] == [
        (v.req_id, v.status, v.text, v.tokens(), v.source) for v in live.requests.values()
    ]
    assert again.latest.values == live.latest.values and again.proxy_url == live.proxy_url
    assert [line.text for line in again.log] == [line.text for line in live.log]
    recording = read_watch_recording(path)
    assert any(isinstance(item, MetricsItem) for item in recording.items) and recording.problem is None


async def test_replay_shows_the_recorded_session(session):
    path, live = session
    recording = read_watch_recording(path)
    app = WatchReplayApp(recording, start_s=1e9)  # everything at once
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.replayed == len(recording.items))
        assert cached(app.state) == cached(live)
        assert "Return the number of items" in shown(app, "#tree-body")  # decoded with the recorded tokenizer
        assert " p1 " in shown(app, "#watch-requests") and " r1 " in shown(app, "#watch-requests")
        assert "● /metrics up" in shown(app, "#watch-title")


async def test_export_writes_a_perfetto_trace_and_a_cut_file_reads_to_its_last_item(session, tmp_path):
    path, live = session
    out = tmp_path / "trace.json"
    assert main(["export", str(path), "--format", "perfetto", str(out)]) == 0
    trace = json.loads(out.read_text())["traceEvents"]
    threads = {e["args"]["name"] for e in trace if e["name"] == "thread_name"}
    assert any(name.startswith("p1 POST /v1/completions") for name in threads) and "KV events" in threads
    assert {"running", "waiting", "KV used %"} <= {e["name"] for e in trace if e["ph"] == "C"}
    assert sum(e["name"] == "streaming" for e in trace) == 2
    assert main(["export", str(path), "--format", "csv", str(tmp_path / "csv")]) == 2
    data = path.read_bytes()
    cut = tmp_path / "cut.etrec"
    cut.write_bytes(data[: len(data) - 5])
    recording = read_watch_recording(cut)
    assert "cut short" in recording.problem and len(recording.items) == len(read_watch_recording(path).items) - 1
    engine_recording = tmp_path / "not.etrec"
    engine_recording.write_bytes(b"ETUIREC\x00\x01\x00")
    assert not is_watch_recording(engine_recording)
    with pytest.raises(RecordingError):
        read_watch_recording(engine_recording)


def test_a_record_file_that_cannot_be_written_is_refused(capsys, tmp_path):
    assert main(["attach", "--vllm", "http://127.0.0.1:9", "--record", str(tmp_path / "no" / "dir" / "x.etrec")]) == 2
    assert "cannot write --record" in capsys.readouterr().err


def test_every_item_of_the_recorded_real_session_round_trips(tmp_path):
    from enginetui.vllm_watch.recording import RecordingWatchState, WatchRecorder

    recorder = WatchRecorder(tmp_path / "r.etrec", "http://127.0.0.1:8000", "ipc:///x")
    state = RecordingWatchState("http://127.0.0.1:8000", "ipc:///x", recorder)
    for sample in recorded.samples():
        state.apply_metrics(sample)
    for batch in recorded.batches():
        state.apply_batch(batch)
    state.kv_status(1.0, "up", "connected")
    recorder.close()
    again = folded(tmp_path / "r.etrec")
    assert cached(again) == cached(state) and again.latest.histograms == state.latest.histograms
    assert again.kv_link == "up" and len(again.log) == len(state.log)


async def test_replay_and_export_commands_know_a_watch_recording(session, capsys):
    path, _ = session
    assert main(["replay", str(path), "--at", "soon"]) == 2  # refused before any screen opens
    assert "is entered at a time (12.5s)" in capsys.readouterr().err
