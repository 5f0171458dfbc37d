"""The fitted step-time model, calibration on the real engine (tiny grid), and the command line."""

import json

import pytest

from enginetui.cli import main
from enginetui.core.record.reader import read_recording
from enginetui.core.sched.step_shape import StepShape
from enginetui.simulate.fitted import FEATURES, FitInfo, FittedModel, fit, load_fitted

pytestmark = pytest.mark.timeout(300)


def test_the_fit_recovers_known_coefficients_and_survives_a_round_trip(tmp_path):
    shapes = [
        StepShape(1, d + (p > 0), p, d, d + (p > 0), d * c, p, p * (p + 1) // 2)
        for d in (1, 4, 16)
        for c in (100, 400)
        for p in (0, 64, 256)
    ]
    truth = lambda s: 2e-3 + 5e-6 * s.num_prefill_tokens + 3e-5 * s.num_decode_tokens + 1e-8 * s.decode_context  # noqa: E731
    model = fit(shapes, [truth(s) for s in shapes], FitInfo("m", "here", 0, 0.0, 0.0))
    assert model.info.r2 == pytest.approx(1.0) and model.info.num_steps == len(shapes)
    for s in shapes:
        assert model.step_seconds(s) == pytest.approx(truth(s), rel=1e-6)
    assert all(v >= 0 for v in model.coefficients.values())
    model.save(tmp_path / "fit.json")
    again = load_fitted(tmp_path / "fit.json")
    assert again.coefficients == model.coefficients and again.info == model.info
    (tmp_path / "other.json").write_text(json.dumps({"kind": "something else"}))
    with pytest.raises(ValueError, match="not a step-time fit"):
        load_fitted(tmp_path / "other.json")


def test_the_fit_recovers_a_prefill_steps_fixed_cost_and_the_attention_over_a_cached_prefix():
    # steps as the scheduler shapes them: D decodes (at context 200 + C) beside K prompt chunks of P new tokens on C
    # earlier ones each
    # (a cached prefix or earlier chunks), the chunks sampling when they end their prompts
    def shape(d: int, k: int, p: int, c: int, last: bool = True) -> StepShape:
        sampled = d + k * last
        return StepShape(1, d + k, k * p, d, sampled, d * (200 + c), k * (c + p), k * (p * c + p * (p + 1) // 2))

    shapes = [
        shape(d, k, p, c, last)
        for d in (0, 1, 4)
        for k in (0, 1, 3)
        for p in (16, 64, 256)
        for c in (0, 272, 500)
        for last in (False, True)
    ]
    shapes = [s for s in shapes if s.num_reqs]
    coefficients = {
        "constant": 2e-3,
        "prefill_tokens": 1e-5,
        "decode_tokens": 7e-4,
        "sampled": 1e-4,
        "prefill_attention_pairs": 2e-7,
        "prefill_step": 5e-3,
    }
    truth = FittedModel(coefficients, FitInfo("m", "here", 0, 0.0, 0.0))
    model = fit(shapes, [truth.step_seconds(s) for s in shapes], FitInfo("m", "here", 0, 0.0, 0.0))
    assert model.info.r2 == pytest.approx(1.0)
    for name in FEATURES:
        assert model.coefficients[name] == pytest.approx(coefficients.get(name, 0.0), rel=1e-6, abs=1e-12)
    # the fixed cost is the step's, whatever its number of chunks; a step with no prompt tokens has none
    assert truth.step_seconds(shape(1, 3, 16, 272)) - truth.step_seconds(shape(1, 1, 16, 272)) == pytest.approx(
        2 * (16 * 1e-5 + (16 * 272 + 136) * 2e-7 + 1e-4)
    )
    assert truth.step_seconds(shape(2, 0, 0, 0)) == pytest.approx(2e-3 + 2 * 8e-4)


def test_a_fit_that_explains_little_of_its_own_steps_is_said_to_be_poor(tmp_path, capsys):
    from enginetui.simulate.calibrate import _save_and_report

    shapes = [StepShape(1, d, 0, d, d, d * 100, 0, 0) for d in (1, 2, 4, 8) for _ in range(3)]
    noise = [1e-3, 5e-3, 2e-3] * 4  # the same three times at every batch size: nothing the shapes explain
    model = fit(shapes, noise, FitInfo("m", "here", 0, 0.0, 0.0))
    _save_and_report(model, str(tmp_path / "fit.json"), "fitted")
    assert model.info.r2 < 0.5 and "a poor fit (R^2 under 0.5)" in capsys.readouterr().out
    good = fit(shapes, [1e-3 + 1e-4 * s.num_decode_tokens for s in shapes], FitInfo("m", "here", 0, 0.0, 0.0))
    _save_and_report(good, str(tmp_path / "good.json"), "fitted")
    assert "poor fit" not in capsys.readouterr().out


def test_calibrate_then_simulate_with_the_fit(tmp_path, capsys):
    out = tmp_path / "fit.json"
    assert main(["simulate", "--calibrate", str(out), "--calibrate-grid", "tiny", "--no-progress"]) == 0
    assert "saved to" in capsys.readouterr().out
    fitted = load_fitted(out)
    assert fitted.info.num_steps == 2 * 2  # per batch size: decode alone, and with a prefill (each a median)
    assert fitted.info.engine_config["max_model_len"] == 512
    assert fitted.step_seconds(StepShape(1, 1, 0, 1, 1, 20, 0, 0)) > 0
    assert (
        main(
            [
                "simulate",
                "--step-times",
                str(out),
                "--num-prompts",
                "20",
                "--random-input-len",
                "64",
                "--random-output-len",
                "16",
                "--request-rate",
                "50",
                "--no-progress",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "20 completed of 20" in text and "fitted (default on" in text


def test_calibration_prefills_no_longer_than_the_model_takes(monkeypatch):
    from enginetui.simulate import calibrate

    monkeypatch.setitem(calibrate.GRIDS, "long", ((1,), (16,), (0, 700)))  # the default model: max_model_len 512
    said: list[str] = []
    fitted = calibrate.calibrate(None, "long", log=said.append)
    assert said[0] == "prefills of 700 tokens measured as 511: the model's max_model_len is 512"
    assert said[2].startswith("D=1   C=16   P=511 ") and fitted.info.num_steps == 2


def test_the_command_prints_figures_and_writes_a_recording_export_reads(tmp_path, capsys):
    rec = tmp_path / "sim.etrec"
    assert (
        main(
            [
                "simulate",
                "--num-prompts",
                "30",
                "--random-input-len",
                "200",
                "--random-output-len",
                "20",
                "--num-gpu-blocks-override",
                "40",
                "--max-num-seqs",
                "8",
                "--goodput",
                "ttft:100",
                "tpot:50",
                "--record",
                str(rec),
                "--no-progress",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    for line in ("30 completed of 30", "goodput", "TTFT", "TPOT", "ITL", "E2E", "KV pool       40 blocks"):
        assert line in text
    recording = read_recording(rec)
    steps = [e for e in recording.events() if e.is_step]
    assert sum(len(e.finished) for e in steps) == 30 and recording.header.engine.num_blocks == 40
    assert main(["export", str(rec), "--format", "csv", str(tmp_path / "csv")]) == 0
    assert len((tmp_path / "csv" / "requests.csv").read_text().splitlines()) == 31


def test_a_recordings_requests_arrive_as_recorded_and_workload_flags_beside_it_are_refused(tmp_path, capsys):
    rec = tmp_path / "sim.etrec"
    assert (
        main(
            [
                "simulate",
                "--num-prompts",
                "6",
                "--random-input-len",
                "64",
                "--request-rate",
                "20",
                "--record",
                str(rec),
                "--no-progress",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["simulate", "--from-recording", str(rec), "--no-progress"]) == 0
    assert f"workload      recording {rec}: its 6 requests, arriving as recorded\n" in capsys.readouterr().out
    assert main(["simulate", "--from-recording", str(rec), "--request-rate", "5", "--seed", "3", "--no-progress"]) == 2
    assert capsys.readouterr().err == (
        "enginetui simulate: --request-rate, --seed: not used with --from-recording, "
        "whose requests arrive as they were recorded (leave them out)\n"
    )


def test_a_sweep_prints_a_table_and_plots(tmp_path, capsys):
    plot = tmp_path / "sweep.png"
    assert (
        main(
            [
                "simulate",
                "--num-prompts",
                "40",
                "--random-input-len",
                "128",
                "--random-output-len",
                "32",
                "--request-rate",
                "100",
                "--sweep",
                "max_num_seqs=2,8,32",
                "--plot",
                str(plot),
                "--no-progress",
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(lines) if "max_num_seqs" in line and "req/s" in line)
    assert [line.split()[0] for line in lines[header + 1 : header + 4]] == ["2", "8", "32"]
    assert plot.stat().st_size > 10_000


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--model", "llama-3.1-70b", "--hardware", "h100"], "does not fit"),
        (["--num-gpu-blocks-override", "4"], "cannot hold request"),
        (["--hardware", "tpu"], "unknown hardware"),
        (["--hardware", "l4"], "fewer than max_model_len 131072"),
        (["--step-times", "recorded"], "give --from-recording"),
        (["--sweep", "nonsense=1,2"], "neither an engine flag"),
        (["--goodput", "latency:3"], "unknown SLO"),
    ],
)
def test_impossible_configs_are_one_clear_line(argv, message, capsys):
    assert main(["simulate", "--num-prompts", "3", "--no-progress", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_run_whose_every_request_is_refused_says_why_and_fails(capsys):
    assert (
        main(
            ["simulate", "--num-prompts", "3", "--random-input-len", "4096", "--max-model-len", "2048", "--no-progress"]
        )
        == 1
    )
    out = capsys.readouterr().out
    assert (
        "0 completed of 3, 3 rejected (never fit; the first: prompt (4096) + max_tokens (128) exceeds "
        "max_model_len (2048))" in out
    )
    assert "no request completed: no throughput or latency to report" in out and "nan" not in out


def test_a_sweep_counts_refused_requests_and_says_why(tmp_path, capsys):
    assert (
        main(
            [
                "simulate",
                "--num-prompts",
                "5",
                "--random-input-len",
                "1024",
                "--sweep",
                "max_model_len=512,4096",
                "--plot",
                str(tmp_path / "sweep.png"),
                "--no-progress",
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(lines) if "max_model_len" in line and "req/s" in line)
    assert lines[header].split()[-1] == "rejected"
    assert lines[header + 1].split()[1] == "nan" and lines[header + 1].split()[-1] == "5"
    assert lines[header + 2].split()[-1] == "0"
    assert lines[header + 3] == "(latencies in ms; nan: no request completed)"
    assert lines[header + 4] == (
        "rejected at max_model_len=512: 5 never fit, the first: prompt (1024) + max_tokens "
        "(128) exceeds max_model_len (512)"
    )


def test_some_refused_requests_are_counted_beside_the_figures(capsys):
    assert (
        main(
            [
                "simulate",
                "--num-prompts",
                "40",
                "--random-input-len",
                "1900",
                "--random-range-ratio",
                "0.1",
                "--max-model-len",
                "2048",
                "--no-progress",
            ]
        )
        == 0
    )
    requests = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("requests"))
    completed, total, rejected = (int(w) for w in requests.replace(",", "").split() if w.isdigit())
    assert total == 40 and 0 < rejected < 40 and completed + rejected == 40
    assert "exceeds max_model_len (2048)" in requests


def test_a_published_figure_is_compared_with_the_roofline_prediction():
    import math

    from tools.sim_published import PublishedResult, compare, comparison_table

    figure = PublishedResult(
        source="a made-up figure",
        model="llama-3.1-8b",
        hardware="h100",
        tensor_parallel_size=1,
        dataset="random",
        num_prompts=50,
        request_rate=math.inf,
        metric="tpot.p50",
        value=20.0,
        input_len=256,
        output_len=32,
        engine_flags={"max_num_seqs": 16},
    )
    c = compare(figure, overhead_ms=0.0)
    assert c.predicted > 0 and c.error_pct == pytest.approx((c.predicted - 20.0) / 20.0 * 100)
    faster = compare(figure, overhead_ms=0.0, mbu=1.0)
    assert faster.predicted < c.predicted  # more bandwidth, shorter decode steps
    assert "| llama-3.1-8b | 1x h100 | random, 50 | inf | tpot.p50 | 20 |" in comparison_table([c])
