"""The `Engine` the dashboard is given in replay: the recorded engine's identity, and no engine.

A recording shows what happened; nothing can be added to it. Every call that would change an
engine (a request, an abort, every control op of core/engine/control.py, under its name there)
raises ReplayOnly with words the app shows as they are.
"""

from collections.abc import AsyncIterator

from enginetui.core.engine.events import StepEvent
from enginetui.core.outputs import RequestOutput
from enginetui.core.record.format import Header
from enginetui.core.sampling_params import SamplingParams

READ_ONLY = "this is a replay of a recording: it shows what happened, nothing can be sent to it"


class ReplayOnly(RuntimeError):
    """An engine operation asked of a recording."""


class RecordedEngine:
    """Implements enginetui.dashboard.engine_link.Engine for a recording (model, device; no process, no calls)."""

    def __init__(self, header: Header, tokenizer) -> None:
        self.header = header  # the recording's header
        self.tokenizer = tokenizer  # the recorded HF tokenizer (None: the recording has none)
        self.engine_pid = None  # no process runs: nothing to probe
        self.info = header.engine  # the recorded EngineInfo: the model panel

    @property
    def model_name(self) -> str:
        return self.header.engine.model_name

    @property
    def device(self) -> str:
        return self.header.engine.device

    async def generate(self, prompt: str, params: SamplingParams, request_id: str) -> AsyncIterator[RequestOutput]:
        raise ReplayOnly(READ_ONLY)
        yield  # an async generator, like AsyncLLM.generate

    async def abort(self, request_id: str) -> None:
        raise ReplayOnly(READ_ONLY)

    async def control(self, op: str, value=None):
        raise ReplayOnly(READ_ONLY)

    async def pause(self) -> None:
        raise ReplayOnly(READ_ONLY)

    async def resume(self) -> None:
        raise ReplayOnly(READ_ONLY)

    async def step_once(self) -> None:
        raise ReplayOnly(READ_ONLY)

    async def reset_prefix_cache(self) -> bool:
        raise ReplayOnly(READ_ONLY)

    async def set_step_interval(self, seconds: float) -> None:
        raise ReplayOnly(READ_ONLY)

    async def snapshot(self) -> StepEvent:
        raise ReplayOnly(READ_ONLY)

    async def events(self) -> AsyncIterator[StepEvent]:
        return
        yield  # an async generator that ends at once: a recording publishes nothing new

    def shutdown(self) -> None:
        pass
