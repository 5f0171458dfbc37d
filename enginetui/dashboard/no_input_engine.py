"""The half of a dashboard Engine that a run taking no input shares: a replay of a recording, a simulated run.

Every call that would change an engine (a request, an abort, every control op of
core/engine/control.py, under its name there) raises EngineRefused with the run's own words, which
the app shows as they are. The app binds the engine keys to `EngineTUI.action_refused`, which
shows the same words without calling.
"""

from collections.abc import AsyncIterator

from enginetui.core.engine.control import OpMethods
from enginetui.core.outputs import RequestOutput
from enginetui.core.sampling_params import SamplingParams


class EngineRefused(RuntimeError):
    """An engine operation asked of a run that takes none."""


class NoInputEngine(OpMethods):
    """Implements the changing half of enginetui.dashboard.engine_link.Engine by refusing every call (the
    control ops' own methods, from OpMethods, go through `control`)."""

    refusal = "nothing can be sent to this run"  # the words every refusal carries (subclasses say why)

    async def generate(self, prompt: str, params: SamplingParams, request_id: str) -> AsyncIterator[RequestOutput]:
        raise EngineRefused(self.refusal)
        yield  # an async generator, like AsyncLLM.generate

    async def abort(self, request_id: str) -> None:
        raise EngineRefused(self.refusal)

    async def control(self, op: str, value=None):
        raise EngineRefused(self.refusal)
