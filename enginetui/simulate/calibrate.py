"""`enginetui simulate --calibrate OUT.json`: measure this engine's steps on this machine over a grid of
batch shapes, fit a step-time model (fitted.py) to them and save it.

Each grid point is D requests decoding at context C, plus (for P > 0) one new request whose P-token
prompt is prefilled in the same step. The engine is the real one (EngineCore in this process, step
events on, as a live engine runs); a step's time is the wall time of `EngineCore.step()`, its shape
the one its event carries. Each point runs one untimed step of its shape first (the first step of a
new shape pays for the math library's set-up of that shape, which a running engine has long paid),
then REPEATS timed ones, of which the median is kept. Timings taken on a loaded machine are what that
machine did then: calibrate on a quiet one.

`enginetui simulate --calibrate-from-recording RUN.etrec FIT.json` (`calibrate_from_recording`) fits the
same model to the steps of a recorded run instead: the engine as it ran there, e.g. behind `enginetui
serve` with its HTTP front-end and streaming clients sharing the CPU, which an engine measured alone
in its process does not see.
"""

import argparse
import dataclasses
import os
import platform
import sys
import time
from typing import TYPE_CHECKING

from enginetui.core.engine.events import StepEvent
from enginetui.core.sched.step_shape import StepShape
from enginetui.simulate.fitted import FEATURES, FitInfo, FittedModel, fit, fit_relative_to_prediction
from enginetui.simulate.step_time import ReplayedStepTimes, StepTimeModel, step_start

if TYPE_CHECKING:
    from enginetui.simulate.from_recording import RecordedRun

GRIDS = {  # name -> (decode batch sizes D, contexts C, prefill lengths P)
    "tiny": ((1, 2), (16,), (0, 8)),
    "standard": ((1, 4, 16, 48), (64, 256), (0, 32, 128, 512, 1536)),
}
REPEATS = 3  # timed steps per grid point (after one untimed step of the same shape); the median is kept
MIN_RECORDED_STEPS = 20  # busy steps (followed at once by the next) a recording needs for a fit
MIN_RECORDED_SHAPES = len(FEATURES)  # distinct (prompt tokens, decoding requests) among them: one per coefficient
POOR_FIT_R2 = 0.5  # a fit that explains less of its own steps' times than this is said to be poor
MIN_OF_EACH_KIND = 3  # steps with prompt tokens, and steps of decodes alone, among them


def calibrate(
    model: str | None, grid: str = "standard", engine_args: dict | None = None, log=lambda text: None
) -> FittedModel:
    """Measure and fit. `model`: an HF directory (None: the embedded default model)."""
    from enginetui.bench.decode_batch import end_decode_batch, start_decode_batch, timed_steps
    from enginetui.core.config import EngineConfig
    from enginetui.core.engine.core import EngineCore
    from enginetui.core.engine.output_processor import OutputProcessor
    from enginetui.core.engine.processor import Processor
    from enginetui.core.sampling_params import SamplingParams

    decodes, contexts, prefills = GRIDS[grid]
    args = dict(
        model=model,
        device="cpu",
        max_num_seqs=max(decodes) + 1,
        max_num_batched_tokens=max(max(prefills), max(decodes)) + max(decodes) + 1,
        **(engine_args or {}),
    )
    core = EngineCore(EngineConfig(**{**args, "enable_step_events": True}))  # a step's shape is in its event
    shapes: list[StepShape] = []
    seconds: list[float] = []
    vocab = core.hf_config.vocab_size
    longest = core.max_model_len - 1  # the longest prompt a request of one output token may have
    too_long = [p for p in prefills if p > longest]
    if too_long:
        prefills = tuple(sorted({min(p, longest) for p in prefills}))
        log(
            f"prefills of {', '.join(map(str, too_long))} tokens measured as {longest}: the model's max_model_len "
            f"is {core.max_model_len}"
        )
    info = core.describe(os.getpid())
    processor, output_processor = Processor(None, info), OutputProcessor(None, stream=False)
    last_prompt = SamplingParams(max_tokens=1, ignore_eos=True, temperature=0)
    n = 0
    for context in contexts:
        for batch in decodes:
            if context + 2 + (1 + REPEATS) * len(prefills) >= core.max_model_len:
                continue
            prompts = [[(7 * (n + i) + j) % (vocab - 3) + 3 for j in range(context)] for i in range(batch)]
            req_ids = start_decode_batch(core, processor, output_processor, prompts, 0.0, f"cal-{n}")
            n += batch
            for prefill in prefills:

                def add_prompt(prefill: int = prefill) -> None:  # its P-token prompt prefilled beside the D decodes
                    nonlocal n
                    if prefill:
                        prompt = [(11 * n + j) % (vocab - 3) + 3 for j in range(prefill)]
                        core.add_request(processor.process(f"cal-{n}", prompt, last_prompt)[0])
                        n += 1

                steps = timed_steps(core, 1 + REPEATS, batch, add_prompt)
                next(steps)  # the first step of the shape is not timed
                timed = sorted(((s, _shape_of(event)) for s, _, event in steps), key=lambda pair: pair[0])
                median_s, shape = timed[len(timed) // 2]
                if (shape.num_prefill_tokens, shape.num_decode_tokens) != (prefill, batch):
                    raise RuntimeError(
                        f"calibration step D={batch} C={context} P={prefill} ran "
                        f"{shape.num_decode_tokens} decodes and {shape.num_prefill_tokens} prompt "
                        f"tokens instead"
                    )
                seconds.append(median_s)
                shapes.append(shape)
                log(
                    f"D={batch:<3} C={context:<4} P={prefill:<4} {median_s * 1e3:8.2f} ms "
                    f"(median of {REPEATS}, {timed[0][0] * 1e3:.2f}-{timed[-1][0] * 1e3:.2f})"
                )
            end_decode_batch(core, output_processor, req_ids)
    fit_info = FitInfo(
        model=model or "default",
        machine=machine(),
        num_steps=0,
        r2=0.0,
        mean_abs_error_pct=0.0,
        note="measured with enginetui simulate --calibrate",
        engine_config={"num_blocks": core.num_blocks, "max_model_len": core.max_model_len},
    )
    return fit(shapes, seconds, fit_info)


@dataclasses.dataclass(slots=True)
class RecordedSteps:
    """A recording's busy steps, as the fit sees them."""

    shapes: list[StepShape]  # each busy step's shape, as its event carries it
    seconds: list[float]  # its time: from its start to the next step's start
    gaps: list[float]  # of which between steps: from its event being built to the next step's start
    starts: list[float]  # when it started (wall clock, as its event's time)
    # every step's, busy or not: [its start, the next step's start] where work was left after it, else [start, end]
    spans: list[tuple[float, float]]
    num_steps: int  # steps in the recording, busy or not
    fewer_threads: int  # busy steps left out because they ran on fewer CPU threads than the engine has
    model_name: str  # the recorded engine's model
    device: str  # where it ran
    num_blocks: int  # its KV pool
    max_model_len: int  # its longest request


def recorded_steps(path: str | os.PathLike) -> RecordedSteps:
    """The busy steps of one recording: shape and duration of each.

    Each step's shape is the one its event carries (the scheduler's, the very one the simulator prices
    steps with). A recording from before events carried shapes is replayed through the simulator on its
    own clock instead (the engine's scheduler reproduces the recorded steps exactly:
    tests/simulate/test_exact_replay.py), each shape checked against the recorded step's token counts.

    The duration fitted is the time from a step's start to the next step's start, while the engine
    stays busy. The simulator's clock runs a busy engine's steps back to back (the next one starts when
    the step-time model says the previous one ended), so a step's modelled time has to hold all the time
    the engine spends per step, not only its schedule / execute / update: building and publishing the
    step's event, streaming its tokens out, taking in new requests, and the CPU that other threads and
    processes take meanwhile (behind `enginetui serve`, the HTTP front-end and its streaming clients on
    the same cores). Steps after which the engine had nothing left to run (running and waiting queues
    empty) are left out, since the time to the next start then includes waiting for a request; so are
    paused or slow-motion steps, any step whose successor the recording lacks, and steps the thread
    governor ran on fewer CPU threads than the engine has (another process was competing for the
    cores: `fewer_threads` counts them). (So a simulated step's
    tokens come out at the next step's start, where the engine's came out when its event was built: later
    by the time between steps, `gaps`, under a millisecond on average in a server run.)
    """
    from enginetui.core.record.format import RecordingError
    from enginetui.simulate.from_recording import recorded_run

    try:
        recorded = recorded_run(str(path))
    except RecordingError as exc:
        raise ValueError(str(exc)) from None
    steps = recorded.steps
    if not steps:
        raise ValueError(f"{path} holds no engine step to fit")
    if any(e.async_scheduling for e in steps):
        raise ValueError(
            f"{path} was recorded with --async-scheduling: its steps overlap, and the simulator "
            f"models synchronous steps only"
        )
    carried = [e.shape for e in steps if e.shape is not None]
    step_shapes = carried if len(carried) == len(steps) else replayed_shapes(str(path), recorded)
    starts = [step_start(e) for e in steps]
    last = len(steps) - 1
    spans = [
        (starts[k], starts[k + 1] if k < last and (e.running or e.waiting) else e.time) for k, e in enumerate(steps)
    ]
    shapes, seconds, gaps, busy_starts = [], [], [], []
    fewer_threads = 0
    for k, (event, following) in enumerate(zip(steps, steps[1:])):
        if not (event.running or event.waiting):
            continue  # idle after it: the next start waited for a request
        if event.paused or event.step_interval_ms or following.paused or following.step != event.step + 1:
            continue  # single-stepped, slowed down, or the next step is missing
        period = starts[k + 1] - starts[k]
        if period <= 0:
            continue  # clocks out of order (a wall-clock jump)
        if recorded.on_fewer_threads(event):
            fewer_threads += 1
            continue  # beside a busy process: not the machine the fit describes
        shapes.append(step_shapes[k])
        seconds.append(period)
        gaps.append(starts[k + 1] - event.time)
        busy_starts.append(starts[k])
    header = recorded.header
    device = (
        f"{header.engine.device} ({header.engine.dtype}), recorded "
        f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime(header.created))} UTC"
    )
    return RecordedSteps(
        shapes,
        seconds,
        gaps,
        busy_starts,
        spans,
        len(steps),
        fewer_threads,
        recorded.model_name,
        device,
        recorded.num_blocks,
        recorded.max_model_len,
    )


def replayed_shapes(path: str, recorded: "RecordedRun") -> list[StepShape]:
    """The shapes of a recording whose events carry none (recorded before they did): its run replayed
    through the simulator on its own clock, checked step by step against the recorded token counts."""
    from enginetui.simulate.simulator import Simulator

    steps = recorded.steps

    class CapturingReplay(ReplayedStepTimes):
        def __init__(self) -> None:
            super().__init__(steps)
            self.shapes: list[StepShape] = []  # per simulated step

        def advance(self, now: float, shape: StepShape) -> float:
            self.shapes.append(shape)
            return super().advance(now, shape)

    replay = CapturingReplay()
    config = dataclasses.replace(
        recorded.config, num_gpu_blocks_override=recorded.num_blocks, max_model_len=recorded.max_model_len
    )
    Simulator(config, recorded.num_blocks, recorded.max_model_len, replay).run(recorded.requests)
    if len(replay.shapes) != len(steps):
        raise ValueError(
            f"replaying {path} took {len(replay.shapes)} steps where the engine took {len(steps)}: "
            f"the simulated scheduler diverged from the recorded one"
        )
    for shape, event in zip(replay.shapes, steps):
        if (shape.num_prefill_tokens, shape.num_decode_tokens, shape.num_reqs) != (
            event.num_prefill_tokens,
            event.num_decode_tokens,
            len(event.scheduled),
        ):
            raise ValueError(f"replaying {path} diverged from the recorded engine at step {event.step}")
    return replay.shapes


def calibrate_from_recording(paths: str | os.PathLike | list) -> FittedModel:
    """Fit the step-time model (fitted.py) to the busy steps of one or more recorded runs of one model
    (`recorded_steps`): e.g. `enginetui bench serve ... --record RUN.etrec`, for a fit of the server path.
    A recording with too few busy steps, or too few kinds of them to fit every coefficient, is refused."""
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not paths:
        raise ValueError("give at least one recording to fit")
    runs = [recorded_steps(path) for path in paths]
    models = sorted({run.model_name for run in runs})
    if len(models) > 1:
        raise ValueError(f"the recordings ran different models ({', '.join(models)}): fit each on its own")
    shapes = [shape for run in runs for shape in run.shapes]
    seconds = [s for run in runs for s in run.seconds]
    gaps = [g for run in runs for g in run.gaps]
    names = ", ".join(str(p) for p in paths)
    total = sum(run.num_steps for run in runs)
    if len(shapes) < MIN_RECORDED_STEPS:
        raise ValueError(
            f"{names}: only {len(shapes)} of its {total} steps ran back to back with work left "
            f"(the fit needs at least {MIN_RECORDED_STEPS}): record a longer or busier run"
        )
    distinct = len({(shape.num_prefill_tokens, shape.num_decode_tokens) for shape in shapes})
    if distinct < MIN_RECORDED_SHAPES:
        raise ValueError(
            f"{names}: its busy steps have only {distinct} distinct shapes (prompt tokens, decoding "
            f"requests; the fit needs at least {MIN_RECORDED_SHAPES}, one per coefficient): record a "
            f"run with varied prompt lengths and batch sizes"
        )
    num_prefill = sum(1 for shape in shapes if shape.num_prefill_tokens)
    num_decode = sum(1 for shape in shapes if not shape.num_prefill_tokens and shape.num_decode_tokens)
    if num_prefill < MIN_OF_EACH_KIND or num_decode < MIN_OF_EACH_KIND:
        raise ValueError(
            f"{names}: its busy steps hold {num_prefill} steps with prompt tokens and {num_decode} "
            f"of decodes alone (the fit needs at least {MIN_OF_EACH_KIND} of each, or it cannot price "
            f"both): record a run where requests arrive while others decode"
        )
    mean_gap_ms = sum(gaps) / len(gaps) * 1e3
    fewer = sum(run.fewer_threads for run in runs)
    left_out = f"; {fewer} busy steps on fewer CPU threads than the engine's left out" if fewer else ""
    info = FitInfo(
        model=models[0],
        machine=runs[0].device,
        num_steps=0,
        r2=0.0,
        mean_abs_error_pct=0.0,
        note=f"fitted with enginetui simulate --calibrate-from-recording to {len(shapes)} busy steps of "
        f"{total} in {names}: each step's time from its start to the next step's start (the "
        f"engine's time between steps, {mean_gap_ms:.2f} ms on average, included){left_out}",
        engine_config={"num_blocks": runs[0].num_blocks, "max_model_len": runs[0].max_model_len},
    )
    return fit_relative_to_prediction(shapes, seconds, info)  # single noisy steps: see there


def shared_host_slowdown(paths: list, models: list[StepTimeModel]) -> list[tuple[float, float, int]]:
    """How much replicas on one machine slow each other's steps, from a recording per replica of a run they
    served together and a step-time model per replica: each busy step's measured time over its model's price,
    against the share of the step in which the other replicas were busy (RecordedSteps.spans), fitted as a line,
    ratio = a + b x share. Per replica (a, b / a, steps): its model's scale while the others are idle, the
    slowdown while they are all busy (`simulate --shared-host-slowdown`), and the steps fitted."""
    import numpy as np

    if len(paths) < 2 or len(models) != len(paths):
        raise ValueError("the shared host's slowdown needs two replicas' recordings or more, and a model for each")
    recorded = [recorded_steps(path) for path in paths]
    spans = [np.array(steps.spans, dtype=np.float64).reshape(-1, 2) for steps in recorded]  # [steps, 2]
    out = []
    for k, (path, steps, model) in enumerate(zip(paths, recorded, models)):
        others = [spans[j] for j in range(len(paths)) if j != k]
        ratios, shares = [], []
        for shape, start, seconds in zip(steps.shapes, steps.starts, steps.seconds):
            end = start + seconds
            busy = [np.clip(np.minimum(s[:, 1], end) - np.maximum(s[:, 0], start), 0, None).sum() for s in others]
            shares.append(min(float(np.mean(busy)) / seconds, 1.0))
            ratios.append(seconds / max(model.step_seconds(shape), 1e-9))
        x, y = np.array(shares), np.array(ratios)
        if not len(x) or np.ptp(x) < 0.5:
            raise ValueError(
                f"{path}: its replica ran beside busy ones for nearly all or none of its steps: the slowdown "
                f"needs a run in which each replica also ran while the others were idle"
            )
        b, a = np.polyfit(x, y, 1)
        out.append((float(a), float(b / a), len(x)))
    return out


def _shape_of(event: StepEvent | None) -> StepShape:
    if event is None or event.shape is None:
        raise RuntimeError("the calibration engine published no step event")
    return event.shape


def machine() -> str:
    """CPU model and thread count (or the GPU when the engine runs on one)."""
    import torch

    if torch.cuda.is_available():
        return torch.cuda.get_device_name()
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            name = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), name)
    except OSError:
        pass
    return f"{name}, {torch.get_num_threads()} threads"


def run_calibration(args: argparse.Namespace) -> int:
    say = (lambda text: print(text, file=sys.stderr)) if not args.no_progress else (lambda text: None)
    say("enginetui simulate --calibrate: measuring; the figures are this machine's now (calibrate on a quiet one)")
    model = calibrate(args.calibrate_model, args.calibrate_grid, log=say)
    _save_and_report(model, args.calibrate, f"fitted {model.info.num_steps} steps on {model.info.machine}")
    return 0


def run_recording_calibration(args: argparse.Namespace) -> int:
    """`--calibrate-from-recording RUN.etrec [RUN2.etrec ...] FIT.json`."""
    *paths, out = args.calibrate_from_recording
    if not paths:
        raise ValueError(
            "--calibrate-from-recording takes the recording(s), then the fit file to write: RUN.etrec FIT.json"
        )
    if str(out).endswith(".etrec"):
        raise ValueError(
            f"--calibrate-from-recording: the last file is where the fit goes (FIT.json), not a recording: {out}"
        )
    model = calibrate_from_recording(paths)
    _save_and_report(
        model,
        out,
        f"fitted {model.info.num_steps} recorded steps ({model.info.model}, {model.info.machine})",
        model.info.note,
    )
    return 0


def _save_and_report(model: FittedModel, out: str, fitted: str, note: str | None = None) -> None:
    """Save the fit to `out` and print its coefficients (after `fitted`), `note`, and its own error."""
    model.save(out)
    coefficients = ", ".join(f"{k} {v * 1e6:.3g} us" for k, v in model.coefficients.items() if v)
    print(f"{fitted}: {coefficients}")
    if note:
        print(note)
    print(
        f"R^2 {model.info.r2:.3f}, mean error {model.info.mean_abs_error_pct:.1f}%; saved to {out} "
        f"(use it: enginetui simulate --step-times {out})"
    )
    if model.info.r2 < POOR_FIT_R2:
        print(
            f"a poor fit (R^2 under {POOR_FIT_R2:g}): the steps' times vary for reasons their shapes do not "
            f"show, such as other load or too few steps of each kind; measure a longer run on a quiet machine"
        )
