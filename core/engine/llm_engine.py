"""LLMEngine: the synchronous client-side engine (processor -> EngineCore client -> output processor)."""

from typing import Any

from enginetui.core.config import EngineConfig
from enginetui.core.engine.core_client import EngineCoreClient
from enginetui.core.engine.events import StepEvent
from enginetui.core.engine.processor import PromptType
from enginetui.core.engine.tokenizer import open_text_stages
from enginetui.core.outputs import RequestOutput
from enginetui.core.sampling_params import SamplingParams


class LLMEngine:
    """add_request() queues work; step() returns whatever outputs EngineCore has produced."""

    def __init__(self, config: EngineConfig, multiprocess: bool | None = None, log_file: str | None = None) -> None:
        self.config = config  # engine configuration
        self.client = EngineCoreClient.make(config, asyncio_mode=False, multiprocess=multiprocess, log_file=log_file)
        self.info = self.client.info  # limits and identity of the running engine
        # The tokenizer (None on token ids only), tokenize + validate, detokenize + stop strings.
        # n > 1 requests report once, when all their samples are done.
        self.tokenizer, self.processor, self.output_processor = open_text_stages(config, self.client, stream=False)

    def add_request(
        self, request_id: str, prompt: PromptType, params: SamplingParams | None = None, priority: int = 0
    ) -> None:
        if self.output_processor.is_live(request_id):
            raise ValueError(f"request id {request_id!r} is already in use")
        request, text = self.processor.process(request_id, prompt, params, priority)
        for engine_request in self.output_processor.register(request, text):
            self.client.add_request(engine_request)

    def abort_request(self, request_ids: list[str]) -> None:
        self.client.abort_requests([e for r in request_ids for e in self.output_processor.engine_ids(r)])

    def step(self) -> list[RequestOutput]:
        """Outputs produced since the last call; [] at once when no request is in flight."""
        if not self.output_processor.has_unfinished():
            return []  # EngineCore would have nothing to send: don't wait for it
        outputs = self.client.get_output()
        results, to_abort = self.output_processor.process(outputs.outputs)
        if to_abort:
            self.client.abort_requests(to_abort)
        return results

    def has_unfinished_requests(self) -> bool:
        return self.output_processor.has_unfinished()

    def control(self, op: str, value: Any = None) -> Any:
        """Any control operation by name (core.engine.control.OPS); returns its result."""
        return self.client.call(op, value)

    def snapshot(self) -> StepEvent:
        """The engine's full current state, as an event."""
        return self.client.call("snapshot")

    def reset_prefix_cache(self) -> bool:
        """Forget every cached prefix; False (nothing done) while requests hold KV blocks."""
        return self.client.call("reset_prefix_cache")

    def shutdown(self) -> None:
        self.client.shutdown()
