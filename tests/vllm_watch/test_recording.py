"""`enginetui attach --vllm URL --record FILE`: the one recording format, with what a vLLM adds beside the events."""

import json
import lzma
from pathlib import Path

import httpx
import pytest

from enginetui.cli import main
from enginetui.core.record.reader import read_recording
from enginetui.replay.cli import open_session
from enginetui.vllm_watch import vllm_record
from enginetui.vllm_watch.state import SchedulerLimits, WatchState
from tests.support.pilot import until
from tests.vllm_watch import recorded
from tests.vllm_watch.watch_pilot import step_time, watch

SIZE = (150, 50)
BURST = Path(__file__).parent / "fixtures" / "opt-tiny-burst" / "burst.etrec.xz"  # converted to the one format


def cached(state: WatchState) -> set:
    return {k for k, b in state.caches.ranks[0].blocks.items() if b.cached}


def folded(path) -> WatchState:
    recording = read_recording(path)
    return WatchState.from_recorded([vllm_record.decode(payload) for _, payload in recording.vllm_items()])


@pytest.fixture
async def session(fake, tmp_path):
    """A recorded session: part of the recorded vLLM run and a request through the proxy."""
    path = tmp_path / "session.etrec"
    app = watch(fake, proxy=("127.0.0.1", 0), record=str(path), limits=SchedulerLimits(16, 512))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.vllm.proxy_url and app.vllm.server and app.vllm.caches.decode is not None)
        fake.play_until(step_time("a burst"))
        await until(pilot, lambda: app.vllm.caches.ranks and app.vllm.caches.ranks[0].last_seq == fake.last_seq)
        async with httpx.AsyncClient(timeout=10) as http:
            r = await http.post(
                f"{app.vllm.proxy_url}/v1/completions",
                json={"model": "opt-tiny", "prompt": "The list", "max_tokens": 24, "stream": True},
            )
            assert r.status_code == 200
        await until(pilot, lambda: app.vllm.requests and not any(v.active for v in app.vllm.requests.values()))
        await until(pilot, lambda: app.vllm.latest is not None and app.vllm.latest.time > 0)
        live = app.vllm
    app.vllm_engine.recording.close()
    return path, live


async def test_a_recorded_session_folds_back_into_the_same_vllm_column(session):
    path, live = session
    again = folded(path)
    assert cached(again) == cached(live) and again.caches.ranks[0].last_seq == live.caches.ranks[0].last_seq
    assert [(v.req_id, v.status, v.text, v.tokens(), v.source) for v in again.requests.values()] == [
        (v.req_id, v.status, v.text, v.tokens(), v.source) for v in live.requests.values()
    ]
    assert again.latest.values == live.latest.values and again.proxy_url == live.proxy_url
    assert [line.text for line in again.log] == [line.text for line in live.log]
    recording = read_recording(path)
    assert recording.header.engine.device == "vLLM (rebuilt from outside)" and recording.trailer is not None
    assert recording.header.engine.model_name == live.server.model  # what /v1/models said


def test_every_item_of_the_recorded_real_session_round_trips():
    state = WatchState("http://127.0.0.1:8000", "ipc:///x")
    items: list[vllm_record.VllmItem] = []
    state.recorder = items.append
    for sample in recorded.samples():
        state.apply_metrics(sample)
    for batch in recorded.batches():
        state.apply_batch(batch)
    state.kv_status(1.0, "up", "connected")
    again = WatchState("http://127.0.0.1:8000", "ipc:///x")
    for item in items:
        again.apply_recorded(vllm_record.decode(vllm_record.encode(item)))
    assert cached(again) == cached(state) and again.latest.histograms == state.latest.histograms
    assert again.kv_link == "up" and len(again.log) == len(state.log)


def test_replay_and_export_open_a_vllm_recording_as_any_other(tmp_path, capsys):
    """The committed burst (the rebuild's events beside what vLLM added): no question which kind of run it was."""
    path = tmp_path / "burst.etrec"
    path.write_bytes(lzma.decompress(BURST.read_bytes()))
    session, notes = open_session(str(path))
    assert notes == [] and len(session.recording) > 600
    assert session.recording.header.engine.device == "vLLM (rebuilt from outside)"
    assert main(["export", str(path), "--format", "perfetto", str(tmp_path / "trace.json")]) == 0
    trace = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    assert sum(e.get("name") == "thread_name" and e["args"]["name"].startswith("p") for e in trace) == 64
    assert main(["export", str(path), "--format", "csv", str(tmp_path / "csv")]) == 0
    steps = (tmp_path / "csv" / "steps.csv").read_text().splitlines()
    assert len(steps) == len(session.recording) + 1  # a row per rebuilt step
    assert "616 events of" in capsys.readouterr().err


def test_a_record_file_that_cannot_be_written_is_refused(capsys, tmp_path):
    assert main(["attach", "--vllm", "http://127.0.0.1:9", "--record", str(tmp_path / "no" / "dir" / "x.etrec")]) == 2
    assert "cannot write --record" in capsys.readouterr().err
