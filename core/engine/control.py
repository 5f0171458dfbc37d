"""Control operations on a running EngineCore: the one table every caller takes its names from.

    op                  value    what it does
    pause               -        stop stepping; requests are still accepted (they wait), aborts are served
    resume              -        step again
    step_once           -        run exactly one engine step (meant for a paused engine)
    snapshot            -        the full current state, as a step event of kind "snapshot" (reads only)
    reset_prefix_cache  -        forget every cached prefix; refused (False) while blocks are in use
    set_step_interval   seconds  slow motion: start busy steps at most every VALUE s (0: full speed)

Every caller (the clients, RemoteEngine's `OpMethods`, `POST /v1/enginetui/control`, the replay engine,
the dashboard's `Engine` protocol) uses these names. `check` validates a call on both sides; a failure
travels as a `ControlError` value and is raised on arrival as the exception its code names.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

import msgspec

MAX_STEP_INTERVAL_S = 10.0  # the slowest slow motion set_step_interval accepts


class Controllable(Protocol):
    """What the ops act on: the busy loop that owns an EngineCore (core/engine/busy_loop.py)."""

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def step(self) -> None: ...

    def snapshot(self) -> Any: ...

    def reset_prefix_cache(self) -> bool: ...

    def set_step_interval(self, seconds: float) -> None: ...


# ---- errors, as values and as exceptions ------------------------------------------------------


class ControlError(msgspec.Struct, frozen=True):
    """A failed control call, as it travels (EngineCore -> its client, server -> attached dashboard)."""

    code: str  # a key of ERROR_CODES
    message: str  # what went wrong, in words a person reads


class ControlFailed(RuntimeError):
    """A control call that failed; `error` is the value it travelled as."""

    code = "failed"  # this class's ERROR_CODES key

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.error = ControlError(code=self.code, message=message)  # what crosses a boundary


class BadControlCall(ControlFailed, ValueError):
    """An unknown op, or a value the op does not take: the caller's mistake."""

    code = "bad_call"


class ControlNotAllowed(ControlFailed, PermissionError):
    """The server lets dashboards watch its engine, not control it (`enginetui serve --allow-control`)."""

    code = "not_allowed"


ERROR_CODES: dict[str, type[ControlFailed]] = {
    cls.code: cls for cls in (ControlFailed, BadControlCall, ControlNotAllowed)
}


def raise_error(error: ControlError) -> NoReturn:
    """Raise the exception `error`'s code names (ControlFailed for a code this side does not know)."""
    raise ERROR_CODES.get(error.code, ControlFailed)(error.message)


# ---- the table --------------------------------------------------------------------------------


def _no_value(op: str, value: Any) -> None:
    if value is not None:
        raise BadControlCall(f"control op {op!r} takes no value, got {value!r}")


def _seconds(op: str, value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or math.isnan(value)
        or not 0.0 <= value <= MAX_STEP_INTERVAL_S
    ):
        raise BadControlCall(f"step interval must be between 0 and {MAX_STEP_INTERVAL_S:g} s, got {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class ControlOp:
    """One control operation."""

    name: str  # what callers send, and the name of every client's method for it
    value: str | None  # what its value is, in words ("seconds"); None: it takes none
    summary: str  # what it does, for help texts
    changes_engine: bool  # False: it only reads (a server that allows watching only still answers it)
    check: Callable[[str, Any], Any]  # (name, value) -> the validated value; raises BadControlCall
    apply: Callable[[Controllable, Any], Any]  # (loop, validated value) -> the reply's result


OPS: dict[str, ControlOp] = {
    op.name: op
    for op in (
        ControlOp(
            "pause",
            None,
            "stop stepping; requests are still accepted (they wait) and aborts are served",
            True,
            _no_value,
            lambda loop, _: loop.pause(),
        ),
        ControlOp("resume", None, "step again", True, _no_value, lambda loop, _: loop.resume()),
        ControlOp(
            "step_once",
            None,
            "run exactly one engine step (meant for a paused engine)",
            True,
            _no_value,
            lambda loop, _: loop.step(),
        ),
        ControlOp(
            "snapshot",
            None,
            "the full current state, as a step event of kind 'snapshot'",
            False,
            _no_value,
            lambda loop, _: loop.snapshot(),
        ),
        ControlOp(
            "reset_prefix_cache",
            None,
            "forget every cached prefix; refused (False) while blocks are in use",
            True,
            _no_value,
            lambda loop, _: loop.reset_prefix_cache(),
        ),
        ControlOp(
            "set_step_interval",
            "seconds",
            "slow motion: start busy steps at most every VALUE seconds (0: full speed)",
            True,
            _seconds,
            lambda loop, seconds: loop.set_step_interval(seconds),
        ),
    )
}


class OpMethods:
    """A method per op, named as the op, for a client whose `control(op, value)` runs any of them
    (AsyncLLM, the attached dashboard's RemoteEngine, and the replay's and simulation's engines, which
    refuse them all); each reads its own snapshot."""

    async def control(self, op: str, value: Any = None) -> Any:
        raise NotImplementedError

    async def pause(self) -> None:
        """Stop stepping (requests can still be added and aborted; they wait)."""
        await self.control("pause")

    async def resume(self) -> None:
        await self.control("resume")

    async def step_once(self) -> None:
        """Exactly one engine step (meant for a paused engine); its outputs and event are delivered."""
        await self.control("step_once")

    async def reset_prefix_cache(self) -> bool:
        """Forget every cached prefix; False (nothing done) while requests hold KV blocks."""
        return await self.control("reset_prefix_cache")

    async def set_step_interval(self, seconds: float) -> None:
        """Slow motion, to watch the engine work: while there is work, start a step at most every
        `seconds` (0 = full speed). Requests, aborts and controls are still served at once."""
        await self.control("set_step_interval", seconds)


def check(op: str, value: Any = None) -> Any:
    """The validated value of a control call; BadControlCall (a ValueError) for an unknown op or a bad value."""
    spec = OPS.get(op)
    if spec is None:
        raise BadControlCall(f"unknown control op {op!r}; expected one of {', '.join(OPS)}")
    return spec.check(op, value)


def apply(loop: Controllable, op: str, value: Any = None) -> Any:
    """Validate and run one control call on `loop`; returns its result."""
    return OPS[op].apply(loop, check(op, value))
