"""`enginetui attach --vllm URL --record FILE`: the one recording format, with what a vLLM adds beside the events."""

import json
import lzma
from pathlib import Path

import httpx
import pytest

from enginetui.cli import main
from enginetui.core.record.reader import read_recording
from enginetui.export.perfetto import VLLM_PID, perfetto_trace
from enginetui.replay.cli import open_session
from enginetui.vllm_watch import vllm_record
from enginetui.vllm_watch.prometheus import KV_USAGE, RUNNING, WAITING
from enginetui.vllm_watch.state import SchedulerLimits, WatchState
from tests.export.trace_format import check_trace_event_format, perfetto_trace_processor
from tests.fakes import vllm_recorded
from tests.support.pilot import until
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
    for sample in vllm_recorded.samples():
        state.apply_metrics(sample)
    for batch in vllm_recorded.batches():
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


def test_the_perfetto_export_has_vllms_metrics_as_counter_tracks(tmp_path):
    """Each /metrics reading of the committed burst: vLLM's queues and KV usage, and the rates the dashboard showed."""
    path = tmp_path / "burst.etrec"
    path.write_bytes(lzma.decompress(BURST.read_bytes()))
    recording = read_recording(path)
    trace = perfetto_trace(recording)
    check_trace_event_format(trace)
    counters: dict[str, list[dict]] = {}
    for e in trace["traceEvents"]:
        if e["ph"] == "C" and e["pid"] == VLLM_PID:
            counters.setdefault(e["name"], []).append(e)
    # the dashboard's figures, folded from the same readings
    samples = [
        i.sample for i in map(vllm_record.decode, (p for _, p in recording.vllm_items())) if hasattr(i, "sample")
    ]
    dashboard = WatchState("http://x:1", None)
    for sample in samples:
        dashboard.apply_metrics(sample)
    h = dashboard.history
    assert len(samples) == 48 and len(h.gen_tok_s) == 47 and max(h.gen_tok_s) > 0
    times = [e["ts"] for e in counters["vLLM running"]]
    assert [round(b - a, 3) for a, b in zip(times, times[1:])] == [
        pytest.approx((b.time - a.time) * 1e6, abs=0.01) for a, b in zip(samples, samples[1:])
    ]
    assert [e["args"]["requests"] for e in counters["vLLM running"]] == [s.total(RUNNING) for s in samples]
    assert [e["args"]["requests"] for e in counters["vLLM waiting"]] == [s.total(WAITING) for s in samples]
    assert max(e["args"]["requests"] for e in counters["vLLM waiting"]) > 0  # the burst queued
    usage = [e["args"]["used"] for e in counters["vLLM KV usage %"]]
    assert usage == [pytest.approx(100 * s.total(KV_USAGE), abs=0.01) for s in samples]
    rates = [e["args"] for e in counters["vLLM tokens/s"]]
    assert [r["generated"] for r in rates] == [pytest.approx(v, abs=1e-3) for v in h.gen_tok_s]
    assert [r["prompt"] for r in rates] == [pytest.approx(v, abs=1e-3) for v in h.prompt_tok_s]
    preempted = [e["args"]["preemptions"] for e in counters["vLLM preemptions/s"]]
    assert preempted == [pytest.approx(v, abs=1e-3) for v in h.preempt_s]
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert names == {"engine", "requests", "vLLM /metrics"}


def test_perfettos_trace_processor_loads_vllms_counters(tmp_path):
    """Perfetto's own parser (skipped where it cannot run)."""
    path = tmp_path / "burst.etrec"
    path.write_bytes(lzma.decompress(BURST.read_bytes()))
    with perfetto_trace_processor(perfetto_trace(read_recording(path)), tmp_path) as tp:
        rows = tp.query(
            "select t.name as name, count(*) as n from counter c join counter_track t on c.track_id = t.id "
            "where t.name like 'vLLM%' group by t.name"
        ).as_pandas_dataframe()
    counts = dict(zip(rows["name"], rows["n"], strict=True))
    assert counts["vLLM running requests"] == counts["vLLM waiting requests"] == 48
    assert counts["vLLM tokens/s generated"] == counts["vLLM tokens/s prompt"] == 47


def test_a_record_file_that_cannot_be_written_is_refused(capsys, tmp_path):
    assert main(["attach", "--vllm", "http://127.0.0.1:9", "--record", str(tmp_path / "no" / "dir" / "x.etrec")]) == 2
    assert "cannot write --record" in capsys.readouterr().err
