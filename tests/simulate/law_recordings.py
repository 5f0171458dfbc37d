"""Simulated recordings whose step times follow a known law (LAW, and GAP_S between steps): what a
calibration must give back."""

from enginetui.simulate import from_settings
from enginetui.simulate.api import simulate
from enginetui.simulate.fitted import FitInfo, FittedModel

LAW = {"constant": 2e-3, "prefill_tokens": 5e-5, "decode_tokens": 3e-4, "decode_context": 1e-6}  # seconds per unit
GAP_S = 1.5e-3  # the simulated engine's pause between one step's end and the next one's start


class GappedLaw(FittedModel):
    """LAW's step times, and GAP_S between a step's end and the next start (what publishing, taking in
    requests and a front-end on the same CPU add between the steps of a real engine)."""

    def __init__(self) -> None:
        super().__init__(LAW, FitInfo("law", "here", 0, 1.0, 0.0))

    def next_start(self, now: float, step: int) -> float:
        return now + GAP_S


def simulated_recording(path, monkeypatch, **workload) -> str:
    """The simulator's run on GappedLaw's clock, recorded to `path` (`workload` overrides the settings)."""
    monkeypatch.setattr(from_settings, "step_model", lambda s, steps: (GappedLaw(), None, {}))
    settings = dict(
        num_prompts=40,
        input_len=64,
        output_len=16,
        range_ratio=0.8,
        request_rate=60,
        seed=3,
        model="law",
        num_gpu_blocks_override=400,
        max_model_len=512,
        record=str(path),
    )
    simulate(**{**settings, **workload})
    return str(path)
