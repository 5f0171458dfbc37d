"""Bodies shared by the OpenAI routes: errors, usage, the sampling fields, models, tokenize.

Field names, defaults and shapes follow vLLM 0.32's `vllm/entrypoints/openai` and
`vllm/entrypoints/serve` protocol modules; fields this engine cannot honour are refused with a
400 (see UNSUPPORTED_FIELDS) rather than silently ignored.
"""

import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from enginetui.core.sampling_params import SamplingParams

# Request fields of vLLM / OpenAI that this server does not implement: naming one is a 400.
UNSUPPORTED_FIELDS = frozenset(
    {
        "logit_bias",
        "suffix",
        "use_beam_search",
        "best_of",
        "prompt_logprobs",
        "logprob_token_ids",
        "allowed_token_ids",
        "bad_words",
        "structured_outputs",
        "guided_json",
        "guided_regex",
        "guided_choice",
        "prompt_embeds",
        "functions",
        "tools",
        "tool_choice",
        "response_format",
        "truncate_prompt_tokens",
    }
)


class OpenAIBaseModel(BaseModel):
    """Unknown fields are accepted and ignored, as the OpenAI API and vLLM do."""

    model_config = ConfigDict(extra="allow")

    def unsupported_fields(self) -> list[str]:
        """Names of set request fields this server refuses (values that change nothing are allowed)."""
        extra = self.model_extra or {}
        harmless: tuple[object, ...] = (
            None,
            [],
            {},
            False,
            "none",
            {"type": "text"},
        )  # values that ask for nothing special
        return sorted(k for k, v in extra.items() if k in UNSUPPORTED_FIELDS and v not in harmless)


class ErrorInfo(OpenAIBaseModel):
    message: str  # what is wrong, in words
    type: str  # BadRequestError, NotFoundError, ...
    param: str | None = None  # the offending request field, when one is to blame
    code: int  # the HTTP status


class ErrorResponse(OpenAIBaseModel):
    error: ErrorInfo  # the one error of the request


class UsageInfo(OpenAIBaseModel):
    prompt_tokens: int = 0  # tokens of the prompt(s)
    total_tokens: int = 0  # prompt + completion
    completion_tokens: int | None = 0  # tokens generated over all choices

    @classmethod
    def of(cls, prompt_tokens: int, completion_tokens: int) -> "UsageInfo":
        return cls(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            total_tokens=prompt_tokens + completion_tokens,
        )


class StreamOptions(OpenAIBaseModel):
    include_usage: bool | None = False  # a last chunk with the usage of the whole request
    continuous_usage_stats: bool | None = False  # usage so far on every chunk (needs include_usage)


class SamplingRequest(OpenAIBaseModel):
    """The sampling and streaming fields /v1/completions and /v1/chat/completions share."""

    model: str | None = None  # served model name (None: the one served)
    n: int = 1  # completions per prompt
    temperature: float | None = None  # None: 1.0
    top_p: float | None = None  # None: 1.0
    top_k: int | None = None  # None: all tokens
    min_p: float | None = None  # None: 0.0
    seed: int | None = None  # per-request sampling seed
    stop: str | list[str] | None = Field(default_factory=list)  # stop strings
    stop_token_ids: list[int] | None = Field(default_factory=list)  # token ids that end generation
    presence_penalty: float | None = None  # None: 0.0
    frequency_penalty: float | None = None  # None: 0.0
    repetition_penalty: float | None = None  # None: 1.0
    ignore_eos: bool = False  # keep going past EOS
    min_tokens: int = 0  # EOS and stop tokens are suppressed before this many tokens
    include_stop_str_in_output: bool = False  # keep a matched stop string in the text
    skip_special_tokens: bool = True  # drop special tokens from the text
    stream: bool | None = False  # answer as server-sent events
    stream_options: StreamOptions | None = None  # usage in the stream
    stream_interval: int | None = None  # tokens per streamed chunk at least; raises the server's --stream-interval
    priority: int = 0  # scheduling priority (lower first, under --scheduling-policy priority)
    request_id: str | None = None  # base of the engine request id (else X-Request-Id, else random)
    user: str | None = None  # accepted and ignored

    def sampling_params(
        self, max_tokens: int, logprobs: int | None, defaults: dict[str, int | float]
    ) -> SamplingParams:
        """The engine's SamplingParams (raises ValueError on an invalid value). A field the request
        leaves out takes the model's generation-config default, else OpenAI's (as vLLM does)."""
        if self.stream_options is not None and not self.stream:
            raise ValueError("Stream options can only be defined when `stream=True`.")

        def pick(name: str, fallback):
            value = getattr(self, name)
            return value if value is not None else defaults.get(name, fallback)

        return SamplingParams(
            n=self.n,
            temperature=pick("temperature", 1.0),
            top_p=pick("top_p", 1.0),
            top_k=pick("top_k", 0),
            min_p=pick("min_p", 0.0),
            seed=self.seed,
            presence_penalty=pick("presence_penalty", 0.0),
            frequency_penalty=pick("frequency_penalty", 0.0),
            repetition_penalty=pick("repetition_penalty", 1.0),
            max_tokens=max_tokens,
            min_tokens=self.min_tokens,
            stop=([self.stop] if isinstance(self.stop, str) else list(self.stop)) if self.stop else None,
            stop_token_ids=list(self.stop_token_ids) if self.stop_token_ids else None,
            ignore_eos=self.ignore_eos,
            include_stop_str_in_output=self.include_stop_str_in_output,
            logprobs=logprobs,
            skip_special_tokens=self.skip_special_tokens,
            stream_interval=self.stream_interval if self.stream else None,  # an answer in one piece has no chunks
        )

    def usage_in_stream(self) -> tuple[bool, bool]:
        """(a final usage chunk, usage on every chunk), from stream_options."""
        options = self.stream_options
        if options is None:
            return False, False
        final = bool(options.include_usage)
        return final, final and bool(options.continuous_usage_stats)


class ModelCard(OpenAIBaseModel):
    id: str  # the served model name
    object: str = "model"  # the OpenAI object type
    created: int = Field(default_factory=lambda: int(time.time()))  # Unix time of this listing
    owned_by: str = "enginetui"  # who serves it
    root: str | None = None  # where the weights came from
    parent: str | None = None  # the base model of a fine-tune (none here)
    max_model_len: int | None = None  # longest prompt + output


class ModelList(OpenAIBaseModel):
    object: str = "list"  # the OpenAI object type
    data: list[ModelCard] = Field(default_factory=list)  # the served models (one)


class TokenizeCompletionRequest(OpenAIBaseModel):
    model: str | None = None  # served model name
    prompt: str  # text to tokenize
    add_special_tokens: bool = True  # add BOS etc. as generation would
    return_token_strs: bool | None = False  # also the token strings


class TokenizeChatRequest(OpenAIBaseModel):
    model: str | None = None  # served model name
    messages: list[dict[str, Any]]  # rendered through the chat template first
    add_generation_prompt: bool = True  # end with the assistant's turn opening
    continue_final_message: bool = False  # leave the last message open instead
    add_special_tokens: bool = False  # the template adds them
    return_token_strs: bool | None = False  # also the token strings


class TokenizeResponse(OpenAIBaseModel):
    count: int  # number of tokens
    max_model_len: int  # the engine's limit
    tokens: list[int]  # the token ids
    token_strs: list[str] | None = None  # their strings, when asked for


class DetokenizeRequest(OpenAIBaseModel):
    model: str | None = None  # served model name
    tokens: list[int]  # token ids


class DetokenizeResponse(OpenAIBaseModel):
    prompt: str  # the decoded text
