"""tools/sim_serve_accuracy.py: calibration and tested server runs taken in turns,
the fit of the former predicting the latter. Here the runs are the simulator's own, on a known law
(tests/simulate/law_recordings.py), so the fit gives the law back and predicts the tested runs
to within rounding; the real sitting records `enginetui bench serve` runs instead."""

import json

import pytest

from tests.simulate.law_recordings import simulated_recording
from tools.sim_serve_accuracy import CAL_SEED, TARGET_FIGURES, TEST_SEED, Run, plan, report, sitting

pytestmark = pytest.mark.timeout(120)


def test_the_runs_are_taken_in_turns_calibration_first(tmp_path):
    runs = plan([0.75, 1.5, 3.0], [1.0, 2.0], 2, tmp_path)
    assert [(r.kind, r.rate) for r in runs[:5]] == [
        ("cal", 0.75),
        ("test", 1.0),
        ("cal", 1.5),
        ("test", 2.0),
        ("cal", 3.0),
    ]
    assert runs[5:] == [Run(r.kind, r.rate, r.seed, r.path.replace("-0.etrec", "-1.etrec")) for r in runs[:5]]
    assert {r.seed for r in runs if r.kind == "cal"} == {CAL_SEED} != {TEST_SEED}
    assert len({r.path for r in runs}) == len(runs)


def test_a_sitting_fits_the_calibration_runs_and_predicts_the_tested_ones(tmp_path, monkeypatch):
    order = []

    def record(run: Run) -> None:  # a simulated server run on the known law, at the run's rate and seed
        order.append(run.kind)
        simulated_recording(run.path, monkeypatch, seed=run.seed + 10, request_rate=30 * run.rate)

    results = sitting(plan([0.75, 1.5, 3.0], [1.0, 2.0], 1, tmp_path), record, tmp_path, log=lambda line: None)
    assert order == ["cal", "test", "cal", "test", "cal"]
    assert results["fit"]["r2"] == pytest.approx(1.0)
    assert (tmp_path / "fit.json").exists() and len(results["tested"]) == 2
    for entry in results["tested"]:
        errors = {row["figure"]: row["error_pct"] for row in entry["figures"]}
        for figure in TARGET_FIGURES:
            assert abs(errors[figure]) < 1.0, (entry["run"], figure)
    assert all(entry["fewer_threads"]["steps"] == 0 for entry in results["tested"])  # no model ran on a CPU
    text = report(results)
    assert text.count("within 15%: all of TTFT p50 ms, TTFT p90 ms, TPOT p50 ms") == 2
    assert "fewer CPU threads" not in text
    json.dumps(results)  # main() writes it as accuracy.json


def test_the_report_names_the_figures_that_miss():
    rows = [
        {"figure": f, "measured": 100.0, "predicted": p, "error_pct": p - 100.0}
        for f, p in (("TTFT p50 ms", 110.0), ("TTFT p90 ms", 60.0), ("TPOT p50 ms", 116.0))
    ]
    neighbour = {"steps": 120, "of_steps": 2810, "time_share": 0.08}
    text = report(
        {"tested": [{"run": {"rate": 1.0, "path": "/x/test-1-0.etrec"}, "figures": rows, "fewer_threads": neighbour}]}
    )
    assert "tested run at 1 req/s (test-1-0.etrec)" in text
    assert "within 15%: not TTFT p90 ms, TPOT p50 ms" in text and "-40.0%" in text
    assert "120 of the measured run's 2810 steps ran on fewer CPU threads than the engine has (8% of its" in text
