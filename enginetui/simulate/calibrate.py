"""`enginetui simulate --calibrate OUT.json`: measure this engine's steps on this machine over a grid of
batch shapes, fit a step-time model (fitted.py) to them and save it.

Each grid point is D requests decoding at context C, plus (for P > 0) one new request whose P-token
prompt is prefilled in the same step. The engine is the real one (EngineCore in this process, step
events on, as a live engine runs); a step's time is the wall time of `EngineCore.step()`. Each point
runs one untimed step of its shape first (the first step of a new shape pays for the math library's
set-up of that shape, which a running engine has long paid), then REPEATS timed ones, of which the
median is kept. Timings taken on a loaded machine are what that machine did then: calibrate on a
quiet one.
"""

import argparse
import platform
import sys
import time

from enginetui.simulate.fitted import FitInfo, FittedModel, fit
from enginetui.simulate.step_shape import StepShape, step_shape

GRIDS = {  # name -> (decode batch sizes D, contexts C, prefill lengths P)
    "tiny": ((1, 2), (16,), (0, 8)),
    "standard": ((1, 4, 16, 48), (64, 256), (0, 32, 128, 512, 1536)),
}
REPEATS = 3  # timed steps per grid point (after one untimed step of the same shape); the median is kept


def calibrate(model: str | None, grid: str = "standard", engine_args: dict | None = None,
              log=lambda text: None) -> FittedModel:
    """Measure and fit. `model`: an HF directory (None: the embedded default model)."""
    from enginetui.core.config import EngineConfig
    from enginetui.core.engine.core import EngineCore

    decodes, contexts, prefills = GRIDS[grid]
    args = dict(model=model, device="cpu", max_num_seqs=max(decodes) + 1,
                max_num_batched_tokens=max(max(prefills), max(decodes)) + max(decodes) + 1, **(engine_args or {}))
    core = EngineCore(EngineConfig(**args))
    shapes: list[StepShape] = []
    seconds: list[float] = []
    captured: list[StepShape] = []
    schedule = core.scheduler.schedule

    def schedule_and_capture():  # the plan's shape, as the simulator computes it
        plan = schedule()
        captured.append(step_shape(len(captured) + 1, plan, core.scheduler.requests))
        return plan

    core.scheduler.schedule = schedule_and_capture
    vocab = core.hf_config.vocab_size
    n = 0
    for context in contexts:
        for batch in decodes:
            if context + 2 + (1 + REPEATS) * len(prefills) >= core.max_model_len:
                continue
            ids = [f"cal-{n + i}" for i in range(batch)]
            for i, req_id in enumerate(ids):
                _add(core, req_id, [(7 * (n + i) + j) % (vocab - 3) + 3 for j in range(context)],
                     core.max_model_len - context)
            n += batch
            while any(r.num_output_tokens == 0 for r in core.scheduler.running) or len(core.scheduler.waiting):
                core.step()  # prefill them (not measured)
            for prefill in prefills:
                timed: list[tuple[float, StepShape]] = []  # (seconds, shape) of the timed steps
                for repeat in range(1 + REPEATS):
                    if prefill:  # a new request each step: its P-token prompt is prefilled alongside the D decodes
                        _add(core, f"cal-{n}", [(11 * n + j) % (vocab - 3) + 3 for j in range(prefill)], 1)
                        n += 1
                    captured.clear()
                    t0 = time.perf_counter()
                    core.step()
                    if repeat:  # the first step of the shape is not timed
                        timed.append((time.perf_counter() - t0, captured[-1]))
                median_s, shape = sorted(timed, key=lambda pair: pair[0])[len(timed) // 2]
                seconds.append(median_s)
                shapes.append(shape)
                log(f"D={batch:<3} C={context:<4} P={prefill:<4} {median_s * 1e3:8.2f} ms "
                    f"(median of {REPEATS}, {min(timed)[0] * 1e3:.2f}-{max(timed)[0] * 1e3:.2f})")
            core.abort_requests([r.request_id for r in [*core.scheduler.running, *core.scheduler.waiting]])
            core.take_update()
    info = FitInfo(model=model or "default", machine=machine(), num_steps=0, r2=0.0, mean_abs_error_pct=0.0,
                   note="measured with enginetui simulate --calibrate", engine_config={"num_blocks": core.num_blocks, "max_model_len": core.max_model_len})
    return fit(shapes, seconds, info)


def _add(core, req_id: str, prompt: list[int], max_tokens: int) -> None:
    from enginetui.core.outputs import EngineCoreRequest
    from enginetui.core.sampling_params import SamplingParams

    params = SamplingParams(max_tokens=max_tokens, ignore_eos=True, temperature=0)
    core.add_request(EngineCoreRequest(request_id=req_id, prompt_token_ids=prompt, sampling_params=params,
                                       eos_token_ids=[], arrival_time=time.time()))


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
    model.save(args.calibrate)
    coefficients = ", ".join(f"{k} {v * 1e6:.3g} us" for k, v in model.coefficients.items() if v)
    print(f"fitted {model.info.num_steps} steps on {model.info.machine}: {coefficients}")
    print(f"R^2 {model.info.r2:.3f}, mean error {model.info.mean_abs_error_pct:.1f}%; saved to {args.calibrate} "
          f"(use it: enginetui simulate --step-times {args.calibrate})")
    return 0
