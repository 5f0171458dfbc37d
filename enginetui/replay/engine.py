"""The `Engine` the dashboard is given in replay: the recorded engine's identity, and no engine.

A recording shows what happened; nothing can be added to it: every call that would change an
engine is refused (enginetui/dashboard/no_input_engine.py) with READ_ONLY.
"""

from collections.abc import AsyncIterator

from enginetui.core.engine.events import StepEvent
from enginetui.core.record.format import Header
from enginetui.dashboard.no_input_engine import EngineRefused, NoInputEngine

READ_ONLY = (
    "this is a replay of a recording: it shows what happened, nothing can be sent to it (enginetui opens a live engine)"
)


class RecordedEngine(NoInputEngine):
    """Implements enginetui.dashboard.engine_link.Engine for a recording (model, device; no process, no calls)."""

    refusal = READ_ONLY

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

    async def snapshot(self) -> StepEvent:
        raise EngineRefused(self.refusal)  # the replay reads its states from the recording

    async def events(self) -> AsyncIterator[StepEvent]:
        return
        yield  # an async generator that ends at once: a recording publishes nothing new

    def shutdown(self) -> None:
        pass
