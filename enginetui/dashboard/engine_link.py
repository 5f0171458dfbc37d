"""What the dashboard needs from an engine, and how it opens the real one.

The app talks to `enginetui.core.engine.async_llm.AsyncLLM` through the `Engine` protocol below, so
tests can hand it a fake engine instead.
"""

from collections.abc import AsyncIterator
from typing import Any, Protocol

from enginetui.core.engine.engine_info import EngineInfo
from enginetui.core.engine.events import StepEvent
from enginetui.core.outputs import RequestOutput
from enginetui.core.sampling_params import SamplingParams
from enginetui.settings import SamplingSettings


class Engine(Protocol):
    """The part of AsyncLLM the dashboard uses. Its control methods (pause, resume, step_once,
    set_step_interval, snapshot) are ops of core.engine.control.OPS, named as there; a refused
    one raises control.ControlFailed (ControlNotAllowed where a server lets dashboards watch only)."""

    @property
    def engine_pid(self) -> int | None: ...  # EngineCore process id (None when in-process)

    @property
    def model_name(self) -> str: ...

    @property
    def device(self) -> str: ...

    @property
    def info(self) -> EngineInfo | None: ...  # the started engine's model, limits and pool (None: not known)

    @property
    def tokenizer(self): ...  # the engine's HF tokenizer: decodes others' requests (None: no text for them)

    def generate(self, prompt: str, params: SamplingParams, request_id: str) -> AsyncIterator[RequestOutput]: ...

    async def abort(self, request_id: str) -> None: ...

    async def pause(self) -> None: ...

    async def resume(self) -> None: ...

    async def step_once(self) -> None: ...

    async def set_step_interval(self, seconds: float) -> None: ...  # slow motion (0 = full speed)

    async def snapshot(self) -> StepEvent: ...

    def events(self) -> AsyncIterator[StepEvent]: ...

    def shutdown(self) -> None: ...


class RefusingEngine(Engine, Protocol):
    """An engine that refuses input (all of it, or the control ops of a watch-only server)."""

    refusal: str  # why, in words: what the dashboard says when a refused key is pressed


def describe(exc: BaseException) -> str:
    """An exception as one readable line (no traceback)."""
    return str(exc) or type(exc).__name__


def startup_error(exc: BaseException, kwargs: dict[str, Any]) -> str:
    """One line for an engine that did not start; points at --tokenizer when the tokenizer is what is missing."""
    from enginetui.core.models.loader import ModelLoadError

    tokenizer = kwargs.get("tokenizer")
    if isinstance(exc, ModelLoadError) and "tokenizer" in str(exc) and not tokenizer:
        return (
            f"no tokenizer found for {kwargs.get('model')!r} (not available locally, or the model has none): "
            "pass --tokenizer DIR with a tokenizer directory"
        )
    if isinstance(exc, ModelLoadError) and tokenizer and repr(tokenizer) in str(exc):  # the --tokenizer path
        return f"--tokenizer {tokenizer}: {describe(exc)}"
    return describe(exc)


def open_engine(engine_args: dict[str, Any], log_file: str | None = None) -> Engine:
    """Start the real engine (EngineCore child process) with vLLM-named arguments; the child's
    output (stdout, stderr, logging, warnings) goes to `log_file`."""
    from enginetui.core.engine.async_llm import AsyncLLM

    return AsyncLLM.from_engine_args(log_file=log_file, **engine_args)


def sampling_params(settings: SamplingSettings) -> SamplingParams:
    """The engine's `SamplingParams` for the dashboard's current settings."""
    return SamplingParams(**settings.as_kwargs())
