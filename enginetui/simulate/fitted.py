"""A step-time model fitted to measured steps: seconds = a linear combination of the step's shape.

`fit(shapes, seconds)` solves least squares over FEATURES with non-negative coefficients (a feature
whose coefficient comes out negative is dropped and the rest refitted, so no step is ever predicted
cheaper for doing more work), on relative errors (each step weighted by 1 / its time: a 40 ms decode
step and a 4 s prefill step count alike, as TPOT and TTFT both depend on them);
`fit_relative_to_prediction` weights by the predicted time instead, for single noisy steps (a
recorded run's, `--calibrate-from-recording`); `save` /
`load_fitted` keep it in a JSON file with where it was measured.
"""

import json
import os
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from enginetui.core.sched.step_shape import StepShape
from enginetui.simulate.step_time import StepTimeModel

FEATURES = (
    "constant",
    "prefill_tokens",
    "decode_tokens",
    "sampled",
    "decode_context",
    "prefill_attention_pairs",  # new tokens x (cached prefix + earlier chunks + themselves, causal)
    "prefill_step",  # 1 for a step that computes prompt tokens: a fixed cost beside its tokens
)
FILE_KIND = "enginetui-step-time-fit"  # the JSON file's "kind"


def features(shape: StepShape) -> tuple[float, ...]:
    """FEATURES of one step, in order."""
    return (
        1.0,
        shape.num_prefill_tokens,
        shape.num_decode_tokens,
        shape.num_sampled,
        shape.decode_context,
        shape.prefill_attention_pairs,
        1.0 if shape.num_prefill_tokens else 0.0,
    )


@dataclass(slots=True)
class FitInfo:
    """Where and how a fit was made."""

    model: str  # the engine's model
    machine: str  # the machine it was measured on (CPU model, threads)
    num_steps: int  # measured points it was fitted to (each the median of a few timed steps of one shape)
    r2: float  # coefficient of determination on those steps
    mean_abs_error_pct: float  # mean |predicted - measured| / measured, in percent
    note: str = ""  # anything the reader should know (a loaded machine, ...)
    engine_config: dict = field(default_factory=dict)  # the engine flags it was measured with


class FittedModel(StepTimeModel):
    """seconds = sum(coefficients[i] * features(shape)[i])."""

    def __init__(self, coefficients: dict[str, float], info: FitInfo) -> None:
        unknown = set(coefficients) - set(FEATURES)
        if unknown:
            raise ValueError(f"unknown step-time features {sorted(unknown)} (known: {', '.join(FEATURES)})")
        self.coefficients = {name: float(coefficients.get(name, 0.0)) for name in FEATURES}  # seconds per unit
        self.info = info  # provenance
        self.name = f"fitted ({info.model} on {info.machine})"
        self._c = tuple(self.coefficients[name] for name in FEATURES)  # in FEATURES order, for the hot loop

    def step_seconds(self, shape: StepShape) -> float:
        c = self._c
        return (
            c[0]
            + c[1] * shape.num_prefill_tokens
            + c[2] * shape.num_decode_tokens
            + c[3] * shape.num_sampled
            + c[4] * shape.decode_context
            + c[5] * shape.prefill_attention_pairs
            + (c[6] if shape.num_prefill_tokens else 0.0)
        )

    def scaled(self, factor: float, why: str) -> "FittedModel":
        """Every step `factor` times as long (`why`: said in the fit's note)."""
        info = replace(self.info, note=f"{self.info.note}; x {factor:.3f}: {why}".lstrip("; "))
        return FittedModel({name: c * factor for name, c in self.coefficients.items()}, info)

    def save(self, path: str | os.PathLike) -> None:
        with open(path, "w") as f:
            json.dump({"kind": FILE_KIND, "coefficients": self.coefficients, "info": asdict(self.info)}, f, indent=2)
            f.write("\n")


def load_fitted(path: str | os.PathLike) -> FittedModel:
    try:
        with open(path) as f:
            data = json.load(f)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not a step-time fit (not JSON: {exc})") from None
    if not isinstance(data, dict) or data.get("kind") != FILE_KIND:
        raise ValueError(f"{path} is not a step-time fit (written by `enginetui simulate --calibrate`)")
    return FittedModel(data["coefficients"], FitInfo(**data["info"]))


def fit(
    shapes: list[StepShape], seconds: list[float], info: FitInfo, relative_to: list[float] | None = None
) -> FittedModel:
    """Non-negative least squares of the relative error over FEATURES (features that do not vary are left
    out; every measured time must be positive). `relative_to`: per step, the time its error is relative
    to (default: its measured time; see fit_relative_to_prediction for noisy single steps)."""
    if len(shapes) != len(seconds) or not shapes:
        raise ValueError("fit needs as many measured times as shapes, and at least one")
    x = np.array([features(s) for s in shapes], dtype=np.float64)  # [steps, features]
    y = np.array(seconds, dtype=np.float64)  # [steps]
    if (y <= 0).any():
        raise ValueError("fit needs positive step times")
    w = y if relative_to is None else np.maximum(np.array(relative_to, dtype=np.float64), 1e-9)  # [steps]
    active = [i for i in range(len(FEATURES)) if i == 0 or np.ptp(x[:, i]) > 0]
    while True:
        scale = np.abs(x[:, active]).max(axis=0)  # [active] columns scaled to 1 for conditioning
        coef, *_ = np.linalg.lstsq(x[:, active] / scale / w[:, None], y / w, rcond=None)  # rows / w
        coef = coef / scale
        negative = [active[j] for j, c in enumerate(coef) if c < 0]
        if not negative:
            break
        active = [i for i in active if i not in negative]
        if not active:
            coef = np.array([])
            break
    coefficients = {FEATURES[i]: float(c) for i, c in zip(active, coef)}
    predicted = x[:, active] @ coef if active else np.zeros_like(y)  # [steps]
    residual = float(((y - predicted) ** 2).sum())
    total = float(((y - y.mean()) ** 2).sum())
    info.r2 = 1.0 - residual / total if total > 0 else 1.0
    info.mean_abs_error_pct = float(np.mean(np.abs(predicted - y) / np.maximum(y, 1e-12)) * 100)
    info.num_steps = len(shapes)
    return FittedModel(coefficients, info)


def fit_relative_to_prediction(
    shapes: list[StepShape], seconds: list[float], info: FitInfo, rounds: int = 5
) -> FittedModel:
    """The relative-error fit, each step's error taken relative to the model's prediction for it rather than
    to its own measured time (iteratively reweighted: first relative to the measured times, then
    `rounds` refits relative to the latest fit's predictions).

    For single noisy steps (a recorded run's, where another thread or process now and then holds the CPU)
    weighting by the measured time itself favours the steps that happened to run fast: a step measured
    twice as long counts a quarter as much, and the fit comes out below the mean time of its shape (on a
    recorded server run, a constant-only fit 30% under the decode steps' mean). The clock's error adds up
    over steps, so the mean is what it needs; weighting by the prediction keeps errors relative (a 40 ms
    decode step and a 1 s prefill count alike) without that bias."""
    model = fit(shapes, seconds, info)
    for _ in range(rounds):
        model = fit(shapes, seconds, info, [model.step_seconds(s) for s in shapes])
    return model
