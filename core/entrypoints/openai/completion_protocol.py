"""POST /v1/completions bodies, as vLLM 0.32 defines them (the subset this engine honours)."""

import time
from typing import Annotated, cast

from pydantic import Field, field_validator

from enginetui.core.entrypoints.openai.protocol import OpenAIBaseModel, SamplingRequest, UsageInfo

TokenIds = list[Annotated[int, Field(ge=0)]]


class CompletionRequest(SamplingRequest):
    prompt: TokenIds | list[TokenIds] | str | list[str] | None = None  # one prompt or a batch, text or ids
    max_tokens: int | None = 16  # generation limit (null: 16, as vLLM)
    logprobs: int | None = None  # top logprobs per token (plus the sampled one)
    echo: bool | None = False  # prepend the prompt to the text
    add_special_tokens: bool = True  # add BOS etc. when tokenizing a text prompt
    return_token_ids: bool | None = None  # also the prompt's and the completion's token ids

    @field_validator("max_tokens", mode="before")
    @classmethod
    def _null_is_default(cls, value):
        """`"max_tokens": null` means the default, 16 (vLLM)."""
        return 16 if value is None else value

    def prompts(self) -> list[str | list[int]]:
        """The batch of prompts (one prompt is a batch of one); raises ValueError when empty."""
        prompt = self.prompt
        if prompt is None or prompt == "" or prompt == []:
            raise ValueError("Either prompt or prompt_embeds must be provided and non-empty.")
        if isinstance(prompt, str):
            return [prompt]
        if all(isinstance(p, int) for p in prompt):
            return [list(cast(list[int], prompt))]
        return list(cast(list[str] | list[list[int]], prompt))


class CompletionLogProbs(OpenAIBaseModel):
    text_offset: list[int] = Field(default_factory=list)  # where each token's text starts in the choice text
    token_logprobs: list[float | None] = Field(default_factory=list)  # logprob of each sampled token
    tokens: list[str] = Field(default_factory=list)  # each token's text
    top_logprobs: list[dict[str, float] | None] = Field(default_factory=list)  # per token: text -> logprob


class CompletionResponseChoice(OpenAIBaseModel):
    index: int  # prompt index * n + completion index
    text: str  # the generated text
    logprobs: CompletionLogProbs | None = None  # when asked for
    finish_reason: str | None = None  # stop | length | abort
    stop_reason: int | str | None = None  # the stop string or token that ended it
    prompt_token_ids: list[int] | None = None  # with return_token_ids
    token_ids: list[int] | None = None  # with return_token_ids


class CompletionResponse(OpenAIBaseModel):
    id: str  # cmpl-...
    object: str = "text_completion"  # the OpenAI object type
    created: int = Field(default_factory=lambda: int(time.time()))  # Unix time of the reply
    model: str  # served model name
    choices: list[CompletionResponseChoice]  # one per prompt and completion
    system_fingerprint: str | None = None  # OpenAI's backend fingerprint (none here)
    usage: UsageInfo  # tokens of the whole request


class CompletionResponseStreamChoice(OpenAIBaseModel):
    index: int  # prompt index * n + completion index
    text: str  # text added since the previous chunk of this choice
    logprobs: CompletionLogProbs | None = None  # of the tokens in this chunk
    finish_reason: str | None = None  # set on the choice's last chunk
    stop_reason: int | str | None = None  # the stop string or token that ended it
    prompt_token_ids: list[int] | None = None  # with return_token_ids: on the choice's first chunk
    token_ids: list[int] | None = None  # with return_token_ids: the tokens of this chunk


class CompletionStreamResponse(OpenAIBaseModel):
    id: str  # cmpl-..., the same on every chunk
    object: str = "text_completion"  # the OpenAI object type
    created: int = Field(default_factory=lambda: int(time.time()))  # Unix time of the chunk
    model: str  # served model name
    choices: list[CompletionResponseStreamChoice]  # empty on the final usage chunk
    usage: UsageInfo | None = Field(default=None)  # with stream_options.include_usage
