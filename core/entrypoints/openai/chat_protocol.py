"""POST /v1/chat/completions bodies, as vLLM 0.32 defines them (the subset this engine honours)."""

import time
from typing import Any

from pydantic import Field

from enginetui.core.entrypoints.openai.protocol import OpenAIBaseModel, SamplingRequest, UsageInfo


class ChatCompletionRequest(SamplingRequest):
    messages: list[dict[str, Any]]  # {"role": ..., "content": str or [{"type": "text", "text": ...}]}
    max_tokens: int | None = None  # deprecated name of max_completion_tokens
    max_completion_tokens: int | None = None  # generation limit (None: up to max_model_len)
    logprobs: bool | None = False  # return logprobs of the sampled tokens
    top_logprobs: int | None = 0  # and of this many candidates per token
    echo: bool = False  # prepend the last message's content when it is the assistant's
    add_generation_prompt: bool = True  # end the prompt with the assistant turn's opening
    continue_final_message: bool = False  # leave the last message open for the model to continue
    add_special_tokens: bool = False  # the chat template adds BOS etc. itself
    chat_template_kwargs: dict[str, Any] | None = None  # extra variables for the template

    def output_limit(self) -> int | None:
        """max_completion_tokens, else the deprecated max_tokens."""
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens

    def num_logprobs(self) -> int | None:
        """SamplingParams.logprobs: top_logprobs candidates when logprobs is on, else None."""
        if self.top_logprobs is not None and self.top_logprobs < 0:
            raise ValueError("`top_logprobs` must be a positive value or -1.")
        return (self.top_logprobs or 0) if self.logprobs else None


class ChatMessage(OpenAIBaseModel):
    role: str  # "assistant"
    content: str | None = None  # the generated text
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)  # always empty (no tool calling)


class ChatCompletionLogProb(OpenAIBaseModel):
    token: str  # the token's text
    logprob: float = -9999.0  # its log-probability
    bytes: list[int] | None = None  # its UTF-8 bytes


class ChatCompletionLogProbsContent(ChatCompletionLogProb):
    top_logprobs: list[ChatCompletionLogProb] = Field(default_factory=list)  # the candidates at this position


class ChatCompletionLogProbs(OpenAIBaseModel):
    content: list[ChatCompletionLogProbsContent] | None = None  # one entry per generated token


class ChatCompletionResponseChoice(OpenAIBaseModel):
    index: int  # completion index
    message: ChatMessage  # the reply
    logprobs: ChatCompletionLogProbs | None = None  # when asked for
    finish_reason: str | None = "stop"  # stop | length | abort
    stop_reason: int | str | None = None  # the stop string or token that ended it


class ChatCompletionResponse(OpenAIBaseModel):
    id: str  # chatcmpl-...
    object: str = "chat.completion"  # the OpenAI object type
    created: int = Field(default_factory=lambda: int(time.time()))  # Unix time of the reply
    model: str  # served model name
    choices: list[ChatCompletionResponseChoice]  # one per completion
    system_fingerprint: str | None = None  # OpenAI's backend fingerprint (none here)
    usage: UsageInfo  # tokens of the request


class DeltaMessage(OpenAIBaseModel):
    role: str | None = None  # "assistant" on each choice's first chunk
    content: str | None = None  # text added since the previous chunk


class ChatCompletionResponseStreamChoice(OpenAIBaseModel):
    index: int  # completion index
    delta: DeltaMessage  # what this chunk adds
    logprobs: ChatCompletionLogProbs | None = None  # of the tokens in this chunk
    finish_reason: str | None = None  # set on the choice's last chunk
    stop_reason: int | str | None = None  # the stop string or token that ended it


class ChatCompletionStreamResponse(OpenAIBaseModel):
    id: str  # chatcmpl-..., the same on every chunk
    object: str = "chat.completion.chunk"  # the OpenAI object type
    created: int = Field(default_factory=lambda: int(time.time()))  # Unix time of the chunk
    model: str  # served model name
    choices: list[ChatCompletionResponseStreamChoice]  # empty on the final usage chunk
    usage: UsageInfo | None = Field(default=None)  # with stream_options.include_usage
