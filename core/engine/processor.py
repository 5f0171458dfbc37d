"""Client-side preprocessing: tokenize and validate a request before it reaches EngineCore."""

import time
from typing import Any

from enginetui.core.engine.engine_info import EngineInfo
from enginetui.core.outputs import EngineCoreRequest
from enginetui.core.sampling_params import SamplingParams

PromptType = (
    str | list[int] | dict
)  # text, token ids, TextPrompt {"prompt": ...}, TokensPrompt {"prompt_token_ids": ...}


class Processor:
    """Turns (prompt, params) into an EngineCoreRequest, or raises ValueError saying what is wrong."""

    def __init__(self, tokenizer, info: EngineInfo) -> None:
        self.tokenizer = tokenizer  # HF tokenizer, or None when running on token ids only
        self.info = info  # limits of the engine
        eos = getattr(tokenizer, "eos_token_id", None) if tokenizer is not None else None
        # Stop tokens of every request: the tokenizer's EOS, then the model's (as vLLM unions them).
        self.eos_token_ids = list(dict.fromkeys(([eos] if eos is not None else []) + info.eos_token_ids))

    def process(
        self, request_id: str, prompt: PromptType, params: SamplingParams | None, priority: int = 0
    ) -> tuple[EngineCoreRequest, str | None]:
        """The engine request and the prompt text (None for token-id prompts).

        `prompt` takes vLLM's forms: a string, a list of token ids, {"prompt": text} (TextPrompt)
        or {"prompt_token_ids": [...]} (TokensPrompt).
        """
        if not isinstance(request_id, str) or not request_id:
            raise ValueError(f"request_id must be a non-empty string, got {request_id!r}")
        if params is None:  # the model's generation config supplies the defaults (vLLM's "auto")
            defaults: dict[str, Any] = self.info.default_sampling  # SamplingParams keywords
            params = SamplingParams(**defaults)
        if not isinstance(params, SamplingParams):
            raise ValueError(f"sampling params must be a SamplingParams, got {type(params).__name__}")
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise ValueError(f"priority must be an integer, got {priority!r}")
        token_ids, text = self._tokenize(prompt)
        limit = self.info.max_model_len
        if len(token_ids) >= limit:
            raise ValueError(
                f"prompt is {len(token_ids)} tokens; max_model_len is {limit} (room for at least one output token is needed)"
            )
        if params.max_tokens is not None and len(token_ids) + params.max_tokens > limit:
            raise ValueError(
                f"prompt ({len(token_ids)} tokens) + max_tokens ({params.max_tokens}) = "
                f"{len(token_ids) + params.max_tokens} exceeds max_model_len ({limit})"
            )
        request = EngineCoreRequest(
            request_id=request_id,
            prompt_token_ids=token_ids,
            sampling_params=params,
            eos_token_ids=self.eos_token_ids,
            arrival_time=time.time(),
            priority=priority,
        )
        return request, text

    def _tokenize(self, prompt: PromptType) -> tuple[list[int], str | None]:
        if isinstance(prompt, dict):
            prompt = _unwrap(prompt)
        if isinstance(prompt, str):
            if not prompt:
                raise ValueError("prompt is empty")
            try:
                prompt.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise ValueError(f"prompt is not valid UTF-8 text: {exc.reason} at position {exc.start}") from exc
            if self.tokenizer is None:
                raise ValueError("this engine runs without a tokenizer: give the prompt as a list of token ids")
            return list(self.tokenizer.encode(prompt)), prompt
        if isinstance(prompt, (list, tuple)):
            if not prompt:
                raise ValueError("prompt token list is empty")
            vocab = self.info.vocab_size
            for t in prompt:
                if isinstance(t, bool) or not isinstance(t, int):
                    raise ValueError(f"prompt token ids must be integers, got {t!r}")
                if not 0 <= t < vocab:
                    raise ValueError(f"prompt token id {t} is outside the vocabulary [0, {vocab})")
            return list(prompt), None
        raise ValueError(
            f"prompt must be a string, a list of token ids, {{'prompt': ...}} or "
            f"{{'prompt_token_ids': [...]}}, got {type(prompt).__name__}"
        )


def _unwrap(prompt: dict) -> str | list[int]:
    """The text or token ids inside a TextPrompt / TokensPrompt dict."""
    keys = set(prompt)
    if keys == {"prompt"}:
        if not isinstance(prompt["prompt"], str):
            raise ValueError(f"'prompt' must be a string, got {type(prompt['prompt']).__name__}")
        return prompt["prompt"]
    if keys == {"prompt_token_ids"}:
        if not isinstance(prompt["prompt_token_ids"], (list, tuple)):
            raise ValueError(
                f"'prompt_token_ids' must be a list of token ids, got {type(prompt['prompt_token_ids']).__name__}"
            )
        return list(prompt["prompt_token_ids"])
    raise ValueError(
        f"a prompt dict must have exactly one key, 'prompt' (text) or 'prompt_token_ids'; got {sorted(keys)}"
    )
