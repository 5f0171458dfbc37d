"""LLMEngine: the synchronous client-side engine (processor -> EngineCore client -> output processor)."""

from core.config import EngineConfig
from core.engine.core_client import InprocClient, use_multiprocess
from core.engine.tokenizer import open_text_stages
from core.outputs import RequestOutput
from core.sampling_params import SamplingParams


class LLMEngine:
    """add_request() queues work; step() returns whatever outputs EngineCore has produced."""

    def __init__(self, config: EngineConfig, multiprocess: bool | None = None) -> None:
        self.config = config  # engine configuration
        if use_multiprocess(multiprocess):
            from core.engine.mp_client import SyncMPClient

            self.client = SyncMPClient(config)
        else:
            self.client = InprocClient(config)
        self.info = self.client.info  # limits and identity of the running engine
        # The tokenizer (None on token ids only), tokenize + validate, detokenize + stop strings.
        self.tokenizer, self.processor, self.output_processor = open_text_stages(config, self.client)

    def add_request(self, request_id: str, prompt: str | list[int], params: SamplingParams | None = None,
                    priority: int = 0) -> None:
        if request_id in self.output_processor.states:
            raise ValueError(f"request id {request_id!r} is already in use")
        request, text = self.processor.process(request_id, prompt, params, priority)
        self.output_processor.add_request(request_id, text, request.prompt_token_ids, request.sampling_params,
                                          request.arrival_time)
        self.client.add_request(request)

    def abort_request(self, request_ids: list[str]) -> None:
        self.client.abort_requests(request_ids)

    def step(self) -> list[RequestOutput]:
        """Outputs produced since the last call; [] at once when no request is in flight."""
        if not self.output_processor.has_unfinished():
            return []  # a multiprocess engine would have nothing to send: don't wait for it
        outputs = self.client.get_output()
        results, to_abort = self.output_processor.process(outputs.outputs)
        if to_abort:
            self.client.abort_requests(to_abort)
        return results

    def has_unfinished_requests(self) -> bool:
        return self.output_processor.has_unfinished()

    def shutdown(self) -> None:
        self.client.shutdown()
