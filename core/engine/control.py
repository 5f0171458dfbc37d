"""Control operations on a running EngineCore: each named, described and validated once, here.

Every client sends a control call as (op name, value); `check` validates it on the client side
(so a bad call fails at once with a ValueError) and again inside EngineCore before `apply`
runs it, so every client — sync, async, in-process, remote — gets the same rules.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

MAX_STEP_INTERVAL_S = 10.0  # the slowest slow motion set_step_interval accepts


class Controllable(Protocol):
    """What the ops act on: the busy loop that owns an EngineCore (core/engine/busy_loop.py)."""

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def step(self) -> None: ...

    def snapshot(self) -> Any: ...

    def reset_prefix_cache(self) -> bool: ...

    def set_step_interval(self, seconds: float) -> None: ...


def _no_value(op: str, value: Any) -> None:
    if value is not None:
        raise ValueError(f"control op {op!r} takes no value, got {value!r}")


def _seconds(op: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value) \
            or not 0.0 <= value <= MAX_STEP_INTERVAL_S:
        raise ValueError(f"step interval must be between 0 and {MAX_STEP_INTERVAL_S:g} s, got {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class ControlOp:
    """One control operation."""

    name: str  # what clients send
    summary: str  # what it does, for help texts
    check: Callable[[str, Any], Any]  # (name, value) -> the validated value; raises ValueError
    apply: Callable[[Controllable, Any], Any]  # (loop, validated value) -> the reply's result


OPS: dict[str, ControlOp] = {op.name: op for op in (
    ControlOp("pause", "stop stepping; requests are still accepted (they wait) and aborts are served",
              _no_value, lambda loop, _: loop.pause()),
    ControlOp("resume", "step again", _no_value, lambda loop, _: loop.resume()),
    ControlOp("step", "run exactly one engine step (meant for a paused engine)", _no_value,
              lambda loop, _: loop.step()),
    ControlOp("snapshot", "the full current state, as a step event of kind 'snapshot'", _no_value,
              lambda loop, _: loop.snapshot()),
    ControlOp("reset_prefix_cache", "forget every cached prefix; refused (False) while blocks are in use",
              _no_value, lambda loop, _: loop.reset_prefix_cache()),
    ControlOp("set_step_interval", "slow motion: start busy steps at most every VALUE seconds (0: full speed)",
              _seconds, lambda loop, seconds: loop.set_step_interval(seconds)),
)}


def check(op: str, value: Any = None) -> Any:
    """The validated value of a control call; ValueError for an unknown op or a bad value."""
    spec = OPS.get(op)
    if spec is None:
        raise ValueError(f"unknown control op {op!r}; expected one of {', '.join(OPS)}")
    return spec.check(op, value)


def apply(loop: Controllable, op: str, value: Any = None) -> Any:
    """Validate and run one control call on `loop`; returns its result."""
    return OPS[op].apply(loop, check(op, value))
