"""tools/fleet_accuracy.py: a real fleet (two `enginetui serve` replicas behind vllm-router) against its
simulation. The pieces are checked here on their own; the live sitting, which needs vllm-router, is slow."""

import argparse
import os
from pathlib import Path

import psutil
import pytest

from enginetui.core.models.default_model import DEFAULT_MODEL_DIR
from enginetui.latency_figures import Latency
from tests.support.checkout import REPO_ROOT
from tools.fleet_accuracy import (
    FIGURES,
    POLICIES,
    REPLICAS,
    Slice,
    compare,
    fleet,
    front_end_costs,
    gain,
    measure_router_tokenize_ms,
    measured_figures,
    median_figures,
    parse_window,
    report,
    simulated_figures,
    sitting,
    spread_pct,
    summarize,
)

pytestmark = pytest.mark.timeout(300)
ROUTER_VENV = REPO_ROOT.parent / "router-venv"  # the tool's default: beside the checkout


def test_a_window_is_start_before_end_and_the_calibration_takes_the_next_one():
    assert parse_window("0:60") == (0.0, 60.0)
    for bad in ("60:0", "5", "a:b", "-1:3", "3:3"):
        with pytest.raises(ValueError, match="START:END seconds"):
            parse_window(bad)
    piece = Slice("mooncake", 30, 90, 2.0)
    assert piece.calibration() == Slice("mooncake", 90, 150, 2.0)
    assert piece.flags() == ["--dataset", "mooncake", "--trace-window", "30:90", "--time-scale", "2"]


def test_every_policy_is_one_the_simulator_runs():
    from enginetui.simulate.routers import ROUTERS

    assert set(POLICIES.values()) <= set(ROUTERS)


def _row(trace, policy, measured, simulated):
    m = dict(zip([f[0] for f in FIGURES], measured))
    s = dict(zip([f[0] for f in FIGURES], simulated))
    return {
        "trace": trace,
        "window": "0:60",
        "time_scale": 1.0,
        "policy": policy,
        "requests": 10,
        "measured": m,
        "simulated": s,
        "error_pct": compare(m, s),
        "replica_requests": {"measured": [6, 4], "simulated": [5, 5]},
    }


def test_errors_mape_and_cache_aware_gain():
    rows = [
        _row("mooncake", "round_robin", [100, 200, 10, 1000], [110, 180, 10, 1000]),
        _row("mooncake", "cache_aware", [50, 100, 10, 800], [60, 100, 12, 900]),
    ]
    assert rows[0]["error_pct"] == pytest.approx({"TTFT p50": 10, "TTFT p90": -10, "TPOT p50": 0, "E2E p50": 0})
    s = summarize(rows)
    assert s["mape_per_run"] == pytest.approx({"mooncake round_robin": 5.0, "mooncake cache_aware": 13.125})
    assert s["mape"] == pytest.approx(9.0625) and s["mape_per_trace"] == pytest.approx({"mooncake": 9.0625})
    g = s["cache_aware_gain_pct"]["mooncake"]
    assert g["TTFT p50"] == pytest.approx({"measured": 50.0, "simulated": gain(110, 60)})
    assert g["E2E p50"] == pytest.approx({"measured": 20.0, "simulated": 10.0})
    text = report({"rows": rows, "summary": s})
    assert "| mooncake (0:60 s, x1) | cache_aware | 10 (6/4 / 5/5) | 50.0 → 60.0 ms (+20.0%) |" in text
    assert "MAPE 9.1% over every figure (target 15%)" in text
    assert "TTFT p50 +50.0% measured, +45.5% simulated" in text


def test_repeated_runs_give_the_median_their_spread_and_the_gain_between_them():
    runs = {
        "round_robin": [[100, 200, 10, 1000], [120, 260, 10, 1000], [110, 230, 10, 1000]],
        "cache_aware": [[50, 100, 10, 800], [70, 100, 10, 800], [60, 100, 10, 800]],
    }
    rows = []
    for policy, simulated in (("round_robin", [115, 300, 10, 1000]), ("cache_aware", [60, 100, 12, 800])):
        figures = [dict(zip([f[0] for f in FIGURES], run)) for run in runs[policy]]
        middle = median_figures(figures)
        row = _row("mooncake", policy, [middle[f[0]] for f in FIGURES], simulated)
        row["measured_runs"] = figures
        rows.append(row)
    assert rows[0]["measured"] == {"TTFT p50": 110, "TTFT p90": 230, "TPOT p50": 10, "E2E p50": 1000}
    assert spread_pct(rows[0]["measured_runs"])["TTFT p50"] == pytest.approx(20 / 110 * 100)
    s = summarize(rows)
    rep = s["repeatability"]["mooncake round_robin"]
    assert rep["runs"] == 3 and rep["simulated_within_runs"] == ["TTFT p50", "TPOT p50", "E2E p50"]  # 300 > 260
    assert s["repeatability"]["mooncake cache_aware"]["simulated_within_runs"] == ["TTFT p50", "TTFT p90", "E2E p50"]
    g = s["cache_aware_gain_pct"]["mooncake"]["TTFT p50"]
    assert g["measured"] == pytest.approx(gain(110, 60)) and g["measured_range"] == pytest.approx(
        [gain(100, 70), gain(120, 50)]
    )
    text = report({"rows": rows, "summary": s})
    assert "| mooncake (0:60 s, x1) | round_robin | 10 (6/4 / 5/5) | 110.0 (100.0-120.0) → 115.0 ms (+4.5%) |" in text
    assert "mooncake round_robin, 3 runs: spread (highest - lowest) / median TTFT p50 18%" in text
    assert (
        f"TTFT p50 {gain(110, 60):+.1f}% measured ({gain(100, 70):+.1f}% to {gain(120, 50):+.1f}% between runs)" in text
    )


def test_figures_are_read_alike_from_a_bench_record_and_a_simulated_summary():
    def latency(p50, p90):
        return {"mean": 0, "p50": p50, "p90": p90, "p99": 0, "count": 1}

    record = {"run": {"ttft_ms": latency(1, 2), "tpot_ms": latency(3, 0), "e2e_ms": latency(4, 0)}}
    summary = argparse.Namespace(ttft=Latency(0, 1, 2, 0, 1), tpot=Latency(0, 3, 0, 0, 1), e2e=Latency(0, 4, 0, 0, 1))
    assert (
        measured_figures(record)
        == simulated_figures(summary)
        == {
            "TTFT p50": 1,
            "TTFT p90": 2,
            "TPOT p50": 3,
            "E2E p50": 4,
        }
    )


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


@pytest.mark.slow
def test_the_front_ends_cpu_is_fitted_per_step_and_per_token(tmp_path, monkeypatch):
    import json
    from types import SimpleNamespace

    import enginetui.simulate.calibrate as calibrate
    import enginetui.simulate.from_recording as from_recording

    served = {"a0": (1000, 1500), "a1": (1200, 1500), "b0": (400, 4000), "b1": (10, 10)}  # steps, tokens
    monkeypatch.setattr(
        from_recording,
        "recorded_run",
        lambda path: SimpleNamespace(requests=[SimpleNamespace(output_len=served[path][1])]),
    )
    monkeypatch.setattr(
        calibrate,
        "recorded_steps",
        lambda path: SimpleNamespace(
            shapes=[SimpleNamespace(num_sampled=1)] * served[path][0] + [SimpleNamespace(num_sampled=0)] * 7
        ),
    )
    runs = []
    for name, records in (("a", ["a0", "a1"]), ("b", ["b0", "b1"])):
        # 0.5 s of the process's own, 250 us a step that sampled (steps that sampled nothing send nothing), 50 a token
        used = [0.5 + steps * 250e-6 + tokens * 50e-6 for steps, tokens in (served[r] for r in records)]
        (tmp_path / f"{name}-front-end-cpu.json").write_text(json.dumps(used))
        runs.append((records, tmp_path / name))
    assert front_end_costs(runs) == pytest.approx((250e-6, 50e-6))
    (tmp_path / "b-front-end-cpu.json").write_text(json.dumps([0.0, 100.0]))  # noise: never a negative cost
    assert min(front_end_costs(runs)) == 0.0
    (tmp_path / "b-front-end-cpu.json").unlink()
    assert front_end_costs(runs) is None  # a sitting from before the measure


def test_a_replicas_work_on_a_prompt_the_router_asks_it_to_tokenize_is_measured_alone():
    before = _children()
    ms = measure_router_tokenize_ms([], [" the cat sat" * 40, " a dog ran" * 40, " it is" * 60])
    assert 0 < ms < 1000 and _children() <= before


def test_a_router_that_will_not_start_leaves_no_replica_behind(tmp_path):
    failing = tmp_path / "vllm-router"
    failing.write_text("#!/bin/sh\necho no such flag >&2\nexit 2\n")
    failing.chmod(0o755)
    before = _children()
    records = [str(tmp_path / f"r{i}.etrec") for i in range(REPLICAS)]
    with pytest.raises(RuntimeError, match="vllm-router exited"):
        with fleet(failing, "round_robin", [], records, tmp_path / "router.log"):
            pass
    assert _children() <= before
    assert "no such flag" in (tmp_path / "router.log").read_text()


@pytest.mark.slow
def test_a_small_live_sitting_measures_and_simulates_each_policy(tmp_path):
    if not (ROUTER_VENV / "bin" / "vllm-router").exists():
        pytest.skip(f"vllm-router is not installed in {ROUTER_VENV} (python tools/fleet_accuracy.py installs it)")
    traces = Path(os.environ.get("ENGINETUI_TRACES_DIR", REPO_ROOT.parent / "shared" / "traces"))
    if not (traces / "azure-2023-conv.csv").exists():
        pytest.skip(f"the Azure trace is not in {traces}")
    args = argparse.Namespace(
        out=str(tmp_path),
        router_venv=str(ROUTER_VENV),
        traces=["azure-conv"],
        policies=["round_robin", "cache_aware"],
        azure_window="0:8",
        mooncake_window="0:4",
        time_scale=2.0,  # 8 s of the trace in 4: enough kinds of step to fit each replica
        timeout_s=120.0,
        repeats=2,
        calibrate_after=True,
        sim_model=str(DEFAULT_MODEL_DIR),
        again=False,
        front_end_us_per_step=None,  # both measured: the front-ends' CPU in the calibration runs
        front_end_us_per_token=None,
        router_tokenize_ms=None,  # measured on a replica alone
    )
    before = _children()
    results = sitting(args, [], log=lambda line: None)
    assert _children() <= before  # every replica, router and client gone
    assert [r["policy"] for r in results["rows"]] == args.policies
    assert all((tmp_path / f"fit-replica{i}.json").exists() for i in (0, 1))  # each replica's own fit
    shared = results["shared_host"]
    assert len(shared["alone"]) == 2 and shared["slowdown"] >= 0
    first, last = shared["alone_per_calibration_run"]["azure-conv"]  # calibrated before and after the tested runs
    assert len(first) == len(last) == 2 and (tmp_path / "azure-conv-cal-after.json").exists()
    assert "calibration runs, before and after the tested runs" in report(results)
    per_step, per_token = results["front_end_cpu"]  # each front-end process's CPU, fitted
    assert per_step >= 0 and per_token >= 0 and per_step + per_token > 0
    assert results["front_end_stream_us"] == pytest.approx([per_step * 1e6, per_token * 1e6])
    assert (tmp_path / "azure-conv-cal-front-end-cpu.json").exists() and "front-end streaming" in report(results)
    for row in results["rows"]:
        counts = row["replica_requests"]
        assert sum(counts["measured"]) == sum(counts["simulated"]) == row["requests"] > 0
        assert all(v > 0 for v in row["measured"].values()) and all(v > 0 for v in row["simulated"].values())
        engine_ttft, predicted = row["engine"]["TTFT p50"]
        assert 0 < engine_ttft and 0 < predicted  # the engine's share of the client's TTFT, from its recording
        assert counts["measured"][row["engine"]["replica"]] == max(counts["measured"])
    assert all(len(row["measured_runs"]) == 2 for row in results["rows"])  # each policy served twice
    assert [row["router_tokenize_ms"] > 0 for row in results["rows"]] == [False, True]  # cache_aware's alone
    assert results["rows"][0]["with_router_tokenize"]["simulated"] == results["rows"][0]["simulated"]
    assert set(results["summary"]["mape_per_trace_with_router_tokenize"]) == {"azure-conv"}
    assert "with cache_aware's tokenize call on every replica" in report(results)
    assert set(results["summary"]["repeatability"]) == {"azure-conv round_robin", "azure-conv cache_aware"}
    assert "the busiest replica as its engine saw it" in report(results)
    rr = results["rows"][0]["replica_requests"]
    assert abs(rr["measured"][0] - rr["measured"][1]) <= 1  # round-robin alternates (the warm-up's 4 keep parity)
    # --again: the same sitting simulated again from what it left, serving nothing
    again = sitting(argparse.Namespace(**{**vars(args), "again": True}), [], log=lambda line: None)
    assert _children() <= before
    assert [r["measured_runs"] for r in again["rows"]] == [r["measured_runs"] for r in results["rows"]]
    assert [r["simulated"] for r in again["rows"]] == [r["simulated"] for r in results["rows"]]
