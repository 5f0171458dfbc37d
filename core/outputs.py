"""What leaves the engine: per-step EngineCore outputs and the user-facing RequestOutput."""

from dataclasses import dataclass, field

import msgspec

from enginetui.core.sampling_params import SamplingParams


class EngineCoreRequest(msgspec.Struct, kw_only=True):
    """A preprocessed request, as sent from the client to EngineCore."""

    request_id: str  # client-visible id, unique among live requests
    prompt_token_ids: list[int]  # tokenized prompt
    sampling_params: SamplingParams  # validated sampling parameters
    eos_token_ids: list[int]  # EOS ids of the tokenizer and the model's generation config (empty: never stop on EOS)
    arrival_time: float  # time.time() when the client accepted it
    priority: int = 0  # lower runs first under the priority policy


class Logprob(msgspec.Struct, array_like=True):
    """Log-probability of one candidate token."""

    token_id: int  # candidate token
    logprob: float  # its log-probability under the sampled distribution


class EngineCoreOutput(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One request's progress in one step."""

    request_id: str  # the request
    new_token_ids: list[int]  # tokens generated this step (empty for a partial prefill)
    new_logprobs: list[list[Logprob]] | None = None  # per new token: sampled first, then the top-N
    finish_reason: str | None = None  # "stop" | "length" | "abort" | "error" | "rejected" once finished
    finish_detail: str = ""  # human-readable reason (e.g. why it was rejected)
    stop_token_id: int | None = None  # the EOS / stop token that ended it, if any
    num_cached_tokens: int = 0  # prompt tokens served by the prefix cache
    first_scheduled_time: float | None = None  # time.time() when it was first scheduled (first output only)
    num_preemptions: int = 0  # on the last output of a request that ran: times it was preempted


class EngineCoreOutputs(msgspec.Struct, kw_only=True):
    """Everything one step produced for the clients."""

    outputs: list[EngineCoreOutput]  # per-request progress this step
    step: int  # the step that produced them
    timestamp: float  # time.time() at the end of the step
    # tokens the model computed in the step whose outputs these are (0: outputs produced between
    # steps); a step that computed tokens sends its outputs even when it has none (a prefill chunk)
    num_scheduled_tokens: int = 0


@dataclass(slots=True)
class RequestMetrics:
    """Timings of one request, wall-clock seconds (time.time())."""

    arrival_time: float  # accepted by the client
    first_scheduled_time: float | None = None  # first scheduled by EngineCore
    first_token_time: float | None = None  # first generated token reached the client
    last_token_time: float | None = None  # latest generated token reached the client
    finished_time: float | None = None  # final output reached the client

    @property
    def queue_time(self) -> float | None:
        return None if self.first_scheduled_time is None else self.first_scheduled_time - self.arrival_time

    @property
    def ttft(self) -> float | None:
        return None if self.first_token_time is None else self.first_token_time - self.arrival_time


@dataclass(slots=True)
class CompletionOutput:
    """The generated part of a request."""

    index: int  # which sample of the request (0 unless n > 1)
    text: str  # detokenized text so far (cut before a matched stop string)
    token_ids: list[int]  # generated token ids so far
    finish_reason: str | None = None  # "stop" | "length" | "abort" | "error" | "rejected", None while running
    stop_reason: str | int | None = None  # the stop string or stop token that ended it
    logprobs: list[dict[int, float]] | None = None  # per token: {token_id: logprob}, sampled token first
    error: str | None = None  # why it was rejected or failed
    cumulative_logprob: float | None = None  # sum of the sampled tokens' logprobs (None unless logprobs were asked)

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass(slots=True)
class RequestOutput:
    """What a caller receives: cumulative, for one request."""

    request_id: str  # the request
    prompt: str | None  # prompt text (None when given as token ids without a tokenizer)
    prompt_token_ids: list[int]  # the tokenized prompt
    outputs: list[CompletionOutput]  # the completions (n > 1 while streaming: the one sample that advanced)
    finished: bool  # True on the last output of this request
    metrics: RequestMetrics  # timings
    num_cached_tokens: int = 0  # prompt tokens served by the prefix cache
    new_text: str = field(default="")  # text added since the previous output of this request (sample)
