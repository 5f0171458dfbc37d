"""`enginetui export`: a recording of a hand-stepped run of the real engine with the scripted model
runner (chunked prefill, a preemption and its recompute) as a Chrome trace-event file, checked against the format's rules (and loaded by
Perfetto's trace processor when it can run here), and as CSV tables."""

import asyncio
import csv
import json

import msgspec
import pytest

from enginetui.cli import main
from enginetui.core.record.reader import read_recording
from enginetui.core.record.writer import write_recording
from enginetui.export.perfetto import ENGINE_PID, REQUESTS_PID, STEPS_TID, perfetto_trace
from tests.dashboard.scripted_recording import record_scripted_run
from tests.export.trace_format import check_trace_event_format, perfetto_trace_processor


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> str:
    return asyncio.run(record_scripted_run(tmp_path_factory.mktemp("export") / "run.etrec"))


def test_the_trace_follows_the_trace_event_format(recording):
    trace = perfetto_trace(read_recording(recording))
    check_trace_event_format(trace)
    json.dumps(trace)  # plain JSON


def test_engine_steps_are_slices_split_into_schedule_execute_update_with_counters(recording):
    rec = read_recording(recording)
    events = [e for e in rec.events() if e.is_step]
    trace = perfetto_trace(rec)["traceEvents"]
    steps = [e for e in trace if e["ph"] == "X" and (e["pid"], e["tid"]) == (ENGINE_PID, STEPS_TID)]
    assert [e["name"] for e in steps[:4]] == ["step 1", "schedule", "execute", "update"]
    assert len(steps) == 4 * len(events) == 240
    first, parts = steps[0], steps[1:4]
    assert first["dur"] == pytest.approx(sum(p["dur"] for p in parts))
    assert first["dur"] == pytest.approx((events[0].sched_ms + events[0].exec_ms + events[0].update_ms) * 1e3)
    assert first["args"]["scheduled tokens"] == events[0].num_scheduled_tokens
    counters = {e["name"] for e in trace if e["ph"] == "C"}
    assert counters == {"KV usage %", "running", "waiting", "batch tokens"}
    full = [e for e in trace if e["ph"] == "C" and e["name"] == "KV usage %" and e["args"]["used"] == 100.0]
    assert full  # the 16-block pool filled up (that is why r6 was preempted)


def test_cpu_threads_are_a_counter_where_steps_ran_a_model_on_a_cpu(recording, tmp_path):
    rec = read_recording(recording)
    trace = perfetto_trace(rec)["traceEvents"]
    assert not [e for e in trace if e["ph"] == "C" and e["name"] == "CPU threads"]  # the scripted runner: none
    threads = lambda e: (1 if e.step % 5 == 0 else 2) if e.is_step else 0  # noqa: E731 - a neighbour every 5th
    events = [msgspec.structs.replace(e, compute_threads=threads(e)) for e in rec.events()]
    path = tmp_path / "threads.etrec"
    write_recording(path, rec.header, events)
    counted = [
        e["args"]["threads"]
        for e in perfetto_trace(read_recording(path))["traceEvents"]
        if e["ph"] == "C" and e["name"] == "CPU threads"
    ]
    assert counted == [threads(e) for e in events if e.is_step]


def test_each_request_has_a_track_with_its_phases_a_preemption_and_its_end(recording):
    trace = perfetto_trace(read_recording(recording))["traceEvents"]
    names = {
        e["tid"]: e["args"]["name"]
        for e in trace
        if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == REQUESTS_PID
    }
    assert sorted(names.values()) == [f"r{i}" for i in range(1, 7)]
    r6 = next(tid for tid, name in names.items() if name == "r6")
    track = sorted(
        (e for e in trace if e["pid"] == REQUESTS_PID and e.get("tid") == r6 and e["ph"] in "Xi"), key=lambda e: e["ts"]
    )
    # preempted twice: the second time right after its recompute (the newest running request goes first)
    assert [e["name"] for e in track] == [
        "waiting",
        "prefill",
        "decode",
        "preempted",
        "waiting (preempted)",
        "recompute",
        "preempted",
        "waiting (preempted)",
        "recompute",
        "decode",
        "end: length",
    ]
    assert track[3]["args"]["step"] == 18 and track[3]["args"]["lost tokens"] == 32
    assert track[5]["args"]["steps"] == "25" and track[6]["args"]["step"] == 26


def test_perfetto_trace_processor_loads_it(recording, tmp_path):
    """Perfetto's own parser (skipped where it cannot run)."""
    with perfetto_trace_processor(perfetto_trace(read_recording(recording)), tmp_path) as tp:
        slices = tp.query("select count(*) as n from slice").as_pandas_dataframe()["n"][0]
        threads = set(tp.query("select name from thread").as_pandas_dataframe()["name"])
    assert slices >= 240 and {f"r{i}" for i in range(1, 7)} <= threads


def test_csv_tables_have_a_row_per_step_and_per_request(recording, tmp_path):
    assert main(["export", recording, "--format", "csv", str(tmp_path / "tables")]) == 0
    steps = list(csv.DictReader((tmp_path / "tables" / "steps.csv").open()))
    requests = {r["req_id"]: r for r in csv.DictReader((tmp_path / "tables" / "requests.csv").open())}
    assert [int(r["step"]) for r in steps] == list(range(1, 61))
    assert {r["compute_threads"] for r in steps} == {"0"}  # the scripted runner runs no model on a CPU
    assert int(steps[17]["preempted"]) == 1 and steps[17]["step"] == "18"
    assert sum(int(r["decode_tokens"]) + int(r["prefill_tokens"]) for r in steps) == sum(
        int(r["scheduled_tokens"]) for r in steps
    )
    assert sorted(requests) == [f"r{i}" for i in range(1, 7)]
    r6 = requests["r6"]
    assert r6["preemptions"] == "2" and r6["prefill_chunks"] == "3" and r6["finish_reason"] == "length"
    assert int(r6["output_tokens"]) == 44 and float(r6["e2e_s"]) > float(r6["ttft_s"]) > 0


def test_the_command_writes_the_trace_and_refuses_what_it_cannot_read(recording, tmp_path, capsys):
    out = tmp_path / "trace.json"
    assert main(["export", recording, "--format", "perfetto", str(out)]) == 0
    assert json.loads(out.read_text())["traceEvents"]
    assert "67 events of" in capsys.readouterr().err
    (tmp_path / "junk").write_bytes(b"junk")
    assert main(["export", str(tmp_path / "junk"), "--format", "csv", str(tmp_path / "t")]) == 2
    assert "is not an enginetui recording" in capsys.readouterr().err


def test_without_out_the_export_goes_beside_the_recording_and_without_format_it_is_perfetto(
    recording, tmp_path, capsys
):
    import shutil

    copy = tmp_path / "run.etrec"
    shutil.copy(recording, copy)
    assert main(["export", str(copy)]) == 0
    assert json.loads((tmp_path / "run.perfetto.json").read_text())["traceEvents"]
    assert capsys.readouterr().err.endswith(f"-> {tmp_path / 'run.perfetto.json'}\n")
    assert main(["export", str(copy), "--format", "csv"]) == 0
    assert sorted(p.name for p in (tmp_path / "run-csv").iterdir()) == ["requests.csv", "steps.csv"]
