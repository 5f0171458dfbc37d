"""`enginetui simulate --calibrate-from-recording`: the step-time model fitted to a recorded run's busy
steps (each step's time from its start to the next step's start), and what it refuses.

Recordings whose step times follow a known law: the simulator's own (its clock moved by that law, a
pause between steps added), and a real engine's (in-process, the scripted model runner sleeping by
the law in each step)."""

import asyncio
import time

import msgspec
import pytest

from enginetui.cli import main
from enginetui.core.engine.async_llm import AsyncLLM
from enginetui.core.record.reader import read_recording
from enginetui.core.record.writer import write_recording
from enginetui.core.sampling_params import SamplingParams
from enginetui.core.sched.step_shape import StepShape
from enginetui.simulate.calibrate import calibrate_from_recording, recorded_steps, shared_host_slowdown
from enginetui.simulate.fitted import FitInfo, load_fitted
from enginetui.simulate.measured import fewer_threads, fewer_threads_line
from enginetui.simulate.step_time import step_start
from tests.fakes.scripted_runner import ScriptedRunner
from tests.simulate.law_recordings import GAP_S, LAW, GappedLaw, simulated_recording

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def law_recording(tmp_path_factory) -> str:
    with pytest.MonkeyPatch.context() as monkeypatch:
        return simulated_recording(tmp_path_factory.mktemp("law") / "law.etrec", monkeypatch)


def test_a_recording_whose_steps_follow_a_law_gives_that_law_back_with_the_time_between_steps(law_recording):
    steps = recorded_steps(law_recording)
    assert steps.gaps and all(g == pytest.approx(GAP_S) for g in steps.gaps)
    assert len(steps.shapes) < steps.num_steps  # the steps before an idle engine are left out
    model = calibrate_from_recording(law_recording)
    truth = {**dict.fromkeys(model.coefficients, 0.0), **LAW, "constant": LAW["constant"] + GAP_S}
    for name, value in truth.items():
        assert model.coefficients[name] == pytest.approx(value, rel=1e-6, abs=1e-12), name
    assert model.info.r2 == pytest.approx(1.0) and model.info.mean_abs_error_pct < 1e-6
    assert model.info.num_steps == len(steps.shapes) and "1.50 ms on average" in model.info.note
    assert model.info.engine_config == {"num_blocks": 400, "max_model_len": 512}


def test_the_command_writes_the_fit_prints_its_error_and_the_simulator_takes_it(law_recording, tmp_path, capsys):
    out = tmp_path / "fit.json"
    assert main(["simulate", "--calibrate-from-recording", law_recording, str(out)]) == 0
    text = capsys.readouterr().out
    assert "R^2 1.000, mean error 0.0%" in text and f"saved to {out}" in text
    fitted = load_fitted(out)
    shape = StepShape(1, 3, 40, 2, 3, 300, 40, 820)
    assert fitted.step_seconds(shape) == pytest.approx(GappedLaw().step_seconds(shape) + GAP_S)
    # simulated on the fitted clock, the recorded run comes back: every step ends where a recorded step started
    assert main(["simulate", "--from-recording", law_recording, "--step-times", str(out), "--no-progress"]) == 0
    assert "40 completed of 40" in capsys.readouterr().out


def test_steps_on_fewer_threads_than_the_engine_has_are_left_out_of_the_fit(law_recording, tmp_path):
    # the law's run as an engine on 4 CPU threads would record it, every 7th step on 1 (a busy neighbour)
    recording = read_recording(law_recording)
    events = [
        msgspec.structs.replace(e, compute_threads=(1 if e.step % 7 == 0 else 4) if e.is_step else 0)
        for e in recording.events()
    ]
    header = msgspec.structs.replace(
        recording.header, engine=msgspec.structs.replace(recording.header.engine, cpu_threads=4)
    )
    path = str(tmp_path / "neighbour.etrec")
    write_recording(path, header, events)
    all_steps, steps = recorded_steps(law_recording), recorded_steps(path)
    assert all_steps.fewer_threads == 0 and steps.fewer_threads > 0
    assert len(steps.shapes) + steps.fewer_threads == len(all_steps.shapes)
    model = calibrate_from_recording(path)
    assert f"{steps.fewer_threads} busy steps on fewer CPU threads than the engine's left out" in model.info.note
    assert model.coefficients["prefill_tokens"] == pytest.approx(LAW["prefill_tokens"], rel=1e-6)
    fewer, total, share = fewer_threads(path)  # what the accuracy report says of such a measured run
    assert (fewer, total) == (sum(1 for e in events if e.is_step and e.compute_threads == 1), steps.num_steps)
    assert 0 < share < 1 and fewer_threads(law_recording)[0] == 0
    assert fewer_threads_line((fewer, total, share)).startswith(f"{fewer} of the measured run's {total} steps")
    # an older recording (no cpu_threads in its header): the most threads any step ran on stands for the engine's
    older = str(tmp_path / "older.etrec")
    write_recording(older, recording.header, events)
    assert recorded_steps(older).fewer_threads == steps.fewer_threads


def test_several_recordings_fit_together(law_recording, tmp_path, monkeypatch):
    other = simulated_recording(tmp_path / "other.etrec", monkeypatch, seed=4, request_rate=30)
    both = calibrate_from_recording([law_recording, other])
    assert both.info.num_steps == len(recorded_steps(law_recording).shapes) + len(recorded_steps(other).shapes)
    assert both.coefficients["prefill_tokens"] == pytest.approx(LAW["prefill_tokens"], rel=1e-6)


@pytest.mark.parametrize(
    "workload, message",
    [
        (dict(num_prompts=2, request_rate=1.0), "the fit needs at least 20"),  # two lone requests: few busy steps
        (
            dict(num_prompts=12, input_len=32, output_len=40, range_ratio=0.0, request_rate=float("inf")),
            "distinct shapes",
        ),  # one batch of equal requests: one prefill and uniform decodes
    ],
    ids=["too-few-steps", "too-few-shapes"],
)
def test_a_recording_too_thin_to_fit_is_refused(tmp_path, monkeypatch, capsys, workload, message):
    path = simulated_recording(tmp_path / "thin.etrec", monkeypatch, **workload)
    with pytest.raises(ValueError, match=message):
        calibrate_from_recording(path)
    assert main(["simulate", "--calibrate-from-recording", path, str(tmp_path / "fit.json")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "fit.json").exists()


def test_a_recording_without_steps_of_both_kinds_is_refused(tmp_path, monkeypatch):
    # one batch, all at once: a single step carries prompt tokens (the fit could not price them), then
    # decode batches that shrink as requests of different lengths finish
    path = simulated_recording(
        tmp_path / "decode.etrec",
        monkeypatch,
        num_prompts=8,
        input_len=16,
        output_len=30,
        range_ratio=0.9,
        request_rate=float("inf"),
    )
    with pytest.raises(ValueError, match="at least 3 of each"):
        calibrate_from_recording(path)


def test_bad_arguments_are_refused(tmp_path, law_recording, capsys):
    not_a_recording = tmp_path / "x.etrec"
    not_a_recording.write_bytes(b"hello")
    for argv, message in [
        ([str(not_a_recording), str(tmp_path / "fit.json")], "is not an enginetui recording"),
        ([str(tmp_path / "missing.etrec"), str(tmp_path / "fit.json")], "No such file"),
        ([law_recording], "the recording(s), then the fit file"),
        ([law_recording, str(tmp_path / "b.etrec")], "the last file is where the fit goes"),
    ]:
        assert main(["simulate", "--calibrate-from-recording", *argv]) == 2, argv
        assert message in capsys.readouterr().err, argv
    with pytest.raises(ValueError, match="at least one recording"):
        calibrate_from_recording([])


# ---- a real engine's recording -------------------------------------------------------------------------

SLEEP_CONSTANT_S = 10e-3  # the sleeping runner's step: this much,
SLEEP_PER_PREFILL_TOKEN_S = 400e-6  # plus this per prompt token (well above a loaded machine's noise per step),
SLEEP_PER_DECODE_S = 5e-4  # plus this per decoding request


class SleepingRunner(ScriptedRunner):
    """The scripted runner, sleeping by a law of the step's shape (a model whose forward costs that)."""

    def execute(self, out):
        time.sleep(
            SLEEP_CONSTANT_S
            + SLEEP_PER_PREFILL_TOKEN_S * out.num_prefill_tokens
            + SLEEP_PER_DECODE_S * out.num_decode_tokens
        )
        return super().execute(out)


async def _record_engine(path) -> None:
    engine = AsyncLLM.from_engine_args(
        model=None,
        model_runner=f"{__name__}:SleepingRunner",
        multiprocess=False,
        device="cpu",
        seed=0,
        num_gpu_blocks_override=128,
        max_num_seqs=8,
        max_model_len=512,
        record=str(path),
    )
    try:

        async def run(i: int, prompt_len: int, max_tokens: int, delay: float) -> None:
            await asyncio.sleep(delay)
            params = SamplingParams(max_tokens=max_tokens, ignore_eos=True, temperature=0)
            async for _ in engine.generate(list(range(5 + i, 5 + i + prompt_len)), params, f"r{i}"):
                pass

        lengths = [
            (30, 24),
            (90, 12),
            (16, 30),
            (120, 20),
            (50, 16),
            (70, 26),
            (24, 18),
            (100, 14),
            (40, 20),
            (140, 10),
            (60, 22),
            (20, 16),
            (110, 18),
            (80, 12),
        ]
        await asyncio.gather(*(run(i, p, o, 0.03 * i) for i, (p, o) in enumerate(lengths)))
        await engine.stop_recording()
    finally:
        engine.shutdown()


def test_a_real_engines_recording_gives_back_the_law_its_steps_slept(tmp_path):
    path = tmp_path / "engine.etrec"
    asyncio.run(_record_engine(path))
    steps = recorded_steps(path)
    assert len(steps.shapes) >= 20 and all(g >= 0 for g in steps.gaps)
    model = calibrate_from_recording(path)
    # each busy step took at least its sleep: the engine's own work and the time between steps come on top
    # (loose bounds: other processes share this machine's CPU)
    assert model.coefficients["constant"] + model.coefficients["sampled"] >= 0.7 * SLEEP_CONSTANT_S
    decode = StepShape(1, 8, 0, 8, 8, 8 * 80, 0, 0)
    law = SLEEP_CONSTANT_S + 8 * SLEEP_PER_DECODE_S
    assert 0.8 * law <= model.step_seconds(decode) <= 2 * law
    # what a prompt adds to a step, priced by the prompt-token and attention-pair terms together (noise on a
    # few prefill steps can move cost between the two, the sum is what the simulator's clock uses)
    for prompt in (16, 64, 140):
        with_prompt = StepShape(1, 9, prompt, 8, 9, 8 * 80, prompt, prompt * (prompt + 1) // 2)
        added = model.step_seconds(with_prompt) - model.step_seconds(decode)
        assert 0.5 <= added / (prompt * SLEEP_PER_PREFILL_TOKEN_S) <= 2, prompt


def test_noisy_steps_are_fitted_to_their_mean_not_to_the_fast_ones():
    # a law's steps, every fourth slowed 2.5x (another process held the CPU): the clock needs the mean
    from enginetui.simulate.fitted import fit, fit_relative_to_prediction

    law = GappedLaw()
    shapes = [
        StepShape(k, d + (p > 0), p, d, d + (p > 0), d * c, p, p * (p + 1) // 2)
        for k, (d, c, p) in enumerate((d, c, p) for d in (1, 2, 4, 8) for c in (50, 200) for p in (0, 0, 0, 40))
    ]
    seconds = [law.step_seconds(s) * (2.5 if k % 4 == 1 else 1.0) for k, s in enumerate(shapes)]
    mean_ratio = sum(s / law.step_seconds(shape) for s, shape in zip(seconds, shapes)) / len(shapes)  # 1.375
    biased = fit(shapes, seconds, FitInfo("m", "x", 0, 0.0, 0.0))
    unbiased = fit_relative_to_prediction(shapes, seconds, FitInfo("m", "x", 0, 0.0, 0.0))
    ratios = lambda model: [model.step_seconds(s) / law.step_seconds(s) for s in shapes]  # noqa: E731
    assert max(ratios(biased)) < 1.2  # weighted by their own times, the slow steps barely count
    assert sum(ratios(unbiased)) / len(shapes) == pytest.approx(mean_ratio, rel=0.02)


def _retimed(recording, events, path, offset: float, slowdown: float, neighbour: str | None) -> str:
    """The recorded run `offset` s later, each busy step longer by `slowdown` x the share of it in which the
    `neighbour` recording's engine was busy (its steps' exec_ms and every later step's time moved alike)."""
    spans = recorded_steps(neighbour).spans if neighbour else None
    steps = [e for e in events if e.is_step]
    nexts = {id(e): step_start(f) for e, f in zip(steps, steps[1:]) if e.running or e.waiting}
    shift, out = offset, []
    for e in events:
        if not e.is_step:
            out.append(e)
            continue
        extra = 0.0
        if spans is not None and id(e) in nexts:
            start, end = step_start(e) + shift, nexts[id(e)] + shift
            share = sum(max(0.0, min(b, end) - max(a, start)) for a, b in spans) / (end - start)
            extra = slowdown * (end - start) * share
        out.append(msgspec.structs.replace(e, time=e.time + shift + extra, exec_ms=e.exec_ms + extra * 1e3))
        shift += extra
    write_recording(path, recording.header, out)
    return str(path)


def test_the_slowdown_of_replicas_sharing_a_host_comes_back_from_their_recordings(law_recording, tmp_path):
    # two replicas that each ran the law's run, one starting half a run after the other; a busy step of either
    # takes 30% longer for the share of it in which the other was busy (built to a fixed point: each one's
    # steps depend on the other's)
    recording = read_recording(law_recording)
    events = list(recording.events())
    steps = [e for e in events if e.is_step]
    half = (steps[-1].time - step_start(steps[0])) / 2
    a = _retimed(recording, events, tmp_path / "a.etrec", 0.0, 0.3, None)
    b = _retimed(recording, events, tmp_path / "b.etrec", half, 0.3, None)
    for _ in range(4):
        a = _retimed(recording, events, tmp_path / "a.etrec", 0.0, 0.3, b)
        b = _retimed(recording, events, tmp_path / "b.etrec", half, 0.3, a)
    fit = calibrate_from_recording(law_recording)  # the law, each step priced as it ran alone
    for alone, slowdown, n in shared_host_slowdown([a, b], [fit, fit]):
        assert alone == pytest.approx(1.0, abs=0.02) and slowdown == pytest.approx(0.3, abs=0.03)
        assert n == len(recorded_steps(law_recording).shapes)
    # replicas that never ran at the same time tell no slowdown
    far = _retimed(recording, events, tmp_path / "far.etrec", 1e4, 0.0, None)
    with pytest.raises(ValueError, match="beside busy ones for nearly all or none of its steps"):
        shared_host_slowdown([law_recording, far], [fit, fit])
    with pytest.raises(ValueError, match="two replicas' recordings or more"):
        shared_host_slowdown([a], [fit])
