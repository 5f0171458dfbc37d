"""Benchmarks record: `--record FILE` keeps the run's recording, the `record` events mode measures
what recording costs beside events on."""

import pytest

from enginetui.bench import latency, throughput
from enginetui.bench.recording import event_modes
from enginetui.core.record.reader import read_recording
from tests.bench.small_runs import SMALL_WORKLOAD, bench_args


@pytest.mark.slow
def test_throughput_record_mode_beside_on_reports_the_ratio_and_removes_its_temporary_file(tiny_opt_dir, capsys):
    args = bench_args("throughput", tiny_opt_dir, *SMALL_WORKLOAD, "--events", "on", "record")
    result = throughput.run(args)
    assert [r.events for r in result.runs] == ["on", "record"]
    assert result.record_ratio == pytest.approx(
        result.best["record"].output_tokens_per_s / result.best["on"].output_tokens_per_s
    )
    rec = result.recording
    assert rec.num_events > 0 and rec.missed_events == 0
    assert "recording" in result.summary
    throughput.report.print_throughput(result)
    assert "written to a temporary file, removed" in capsys.readouterr().out


def test_throughput_record_file_holds_every_step_of_every_pass(tiny_opt_dir, tmp_path):
    path = tmp_path / "tp.etrec"
    args = bench_args("throughput", tiny_opt_dir, *SMALL_WORKLOAD, "--record", str(path), "--repeats", "2")
    result = throughput.run(args)
    assert [r.events for r in result.runs] == ["record", "record"]  # --record alone: the record mode
    rec = read_recording(path)
    assert len(rec) == result.recording.num_events and rec.trailer is not None and rec.total_missed == 0
    generated = sum(len(ids) for e in rec.events() for ids in e.new_token_ids.values())
    assert generated >= 2 * result.output_tokens  # two passes (and the warm-up)
    assert rec.header.source == "LLM"


def test_record_file_without_the_record_mode_is_a_clear_error(tiny_opt_dir, tmp_path):
    args = bench_args("throughput", tiny_opt_dir, "--events", "on", "--record", str(tmp_path / "x.etrec"))
    with pytest.raises(ValueError, match="add it to --events"):
        event_modes(args)
    assert event_modes(bench_args("throughput", tiny_opt_dir)) == ["on"]


def test_latency_records_its_engine(tiny_opt_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("ENGINETUI_MULTIPROC", "0")
    path = tmp_path / "lat.etrec"
    args = bench_args("latency", tiny_opt_dir, *SMALL_WORKLOAD, "--request-rate", "50", "--record", str(path))
    result = latency.run(args)
    rec = read_recording(path)
    assert result.recording.num_events == len(rec) and rec.trailer is not None
    added = {a.req_id for e in rec.events() for a in e.added}
    assert {f"bench-none-{i}" for i in range(5)} <= added
