"""A request as the scheduler tracks it inside EngineCore."""

import enum

from enginetui.core.sampling_params import SamplingParams


class RequestStatus(enum.Enum):
    WAITING = "waiting"  # admitted to the engine, no KV yet (or lost it)
    RUNNING = "running"  # holds KV blocks and advances every step it is scheduled
    PREEMPTED = "preempted"  # waiting again after its KV was dropped (recompute on resume)
    FINISHED_STOPPED = "stop"  # hit EOS, a stop token or a stop string
    FINISHED_LENGTH = "length"  # hit max_tokens or max_model_len
    FINISHED_ABORTED = "abort"  # aborted by the client
    FINISHED_ERROR = "error"  # failed inside the engine
    REJECTED = "rejected"  # refused at admission: it could never fit

    @property
    def finished(self) -> bool:
        return self not in (RequestStatus.WAITING, RequestStatus.RUNNING, RequestStatus.PREEMPTED)


class Request:
    """Progress of one request: `num_computed_tokens` catches up with `num_tokens`."""

    __slots__ = (
        "request_id",
        "prompt_token_ids",
        "output_token_ids",
        "sampling_params",
        "eos_token_ids",
        "arrival_time",
        "priority",
        "status",
        "num_computed_tokens",
        "num_cached_tokens",
        "num_preemptions",
        "max_tokens",
        "first_scheduled_time",
        "finish_detail",
        "num_tokens_sent_to_runner",
        "block_hashes",
        "num_output_placeholders",
        "num_in_flight_tokens",
        "num_stale_output_tokens",
        "num_void_tokens",
        "is_prefill_chunk",
        "num_external_tokens",
    )

    def __init__(
        self,
        request_id: str,
        prompt_token_ids: list[int],
        sampling_params: SamplingParams,
        eos_token_ids: list[int],
        arrival_time: float,
        priority: int = 0,
        max_tokens: int = 16,
    ) -> None:
        self.request_id = request_id  # client-visible id
        self.prompt_token_ids = prompt_token_ids  # the prompt, tokenized
        self.output_token_ids: list[int] = []  # generated tokens so far
        self.sampling_params = sampling_params  # how to sample and when to stop
        self.eos_token_ids = eos_token_ids  # the model's EOS ids (empty: no EOS stop)
        self.arrival_time = arrival_time  # time.time() when EngineCore received it
        self.priority = priority  # lower runs first under the priority policy
        self.status = RequestStatus.WAITING  # where it is in its life
        self.num_computed_tokens = 0  # tokens whose KV is in the cache
        self.num_cached_tokens = 0  # tokens served by the prefix cache at its first admission (as vLLM reports)
        self.num_preemptions = 0  # times its KV was dropped
        self.first_scheduled_time: float | None = None  # time.time() of its first admission
        self.max_tokens = max_tokens  # generation limit, resolved against max_model_len
        self.finish_detail = ""  # human-readable reason once finished
        self.num_tokens_sent_to_runner = 0  # how many of all_token_ids the model runner has been given
        self.block_hashes: list[bytes] = []  # chained SHA-256 hashes of its full blocks (prefix caching)
        # Asynchronous scheduling (the step that samples a token may still be running when the next is planned):
        self.num_output_placeholders = 0  # tokens being sampled by steps in flight, not yet appended
        self.num_in_flight_tokens = 0  # tokens scheduled for it in steps whose outputs are not yet applied
        self.num_stale_output_tokens = 0  # of those, tokens of steps in flight when it was preempted
        self.num_void_tokens = 0  # of those, tokens of steps planned on KV a failed step never wrote (dropped)
        self.num_external_tokens = 0  # prompt tokens whose KV a connector brings (disaggregated prefill's decode side)
        self.is_prefill_chunk = False  # its latest planned step leaves prompt or recompute work (samples nothing)

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.output_token_ids)

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_token_ids) + len(self.output_token_ids)

    @property
    def all_token_ids(self) -> list[int]:
        return self.prompt_token_ids + self.output_token_ids

    def tokens(self, start: int, end: int) -> list[int]:
        """all_token_ids[start:end] without building the whole list."""
        n = len(self.prompt_token_ids)
        if end <= n:
            return self.prompt_token_ids[start:end]
        if start >= n:
            return self.output_token_ids[start - n : end - n]
        return self.prompt_token_ids[start:] + self.output_token_ids[: end - n]
