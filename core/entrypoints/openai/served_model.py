"""The model a server serves: the engine, its name and tokenizer, and the request rules every
route shares (which model name is valid, prompt length and output limits, request ids)."""

import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fastapi import Request

from enginetui.core.entrypoints.openai.errors import bad_request, model_not_found
from enginetui.core.entrypoints.openai.metrics import MeteredEngine
from enginetui.core.entrypoints.openai.protocol import OpenAIBaseModel
from enginetui.core.outputs import CompletionOutput
from enginetui.core.sampling_params import SamplingParams

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


@dataclass(slots=True)
class ServedModel:
    """One engine behind the OpenAI routes."""

    engine: MeteredEngine  # the AsyncLLM (or anything with its interface) metered: generate / abort / snapshot / ...
    name: str  # the model name clients use (--served-model-name, default the --model value)
    tokenizer: "PreTrainedTokenizerBase | None"  # the engine's HF tokenizer (None: token-id prompts only)
    max_model_len: int  # prompt + output limit of the engine
    root: str | None  # where the weights came from (shown by /v1/models)
    eos_token_ids: list[int]  # the engine's EOS tokens (a stop on one reports no stop_reason, as vLLM)
    default_sampling: dict[str, int | float]  # the model's generation-config defaults (SamplingParams names)
    aliases: tuple[str, ...] = ()  # other names requests may send for it

    def check_request(self, request: OpenAIBaseModel, model: str | None) -> None:
        """Raise APIError for an unknown model (404) or fields this server does not implement (400)."""
        if model and model != self.name and model not in self.aliases:
            raise model_not_found(model, ", ".join((self.name, *self.aliases)))
        unsupported = request.unsupported_fields()
        if unsupported:
            raise bad_request(f"{', '.join(unsupported)}: not supported by this server", unsupported[0])

    def tokenize(self, prompt: str | list[int], add_special_tokens: bool = True) -> list[int]:
        """Token ids of a text prompt (ids pass through; the engine checks their range)."""
        if isinstance(prompt, list):
            return prompt
        if self.tokenizer is None:
            raise bad_request("this server runs without a tokenizer: send prompts as token ids", "prompt")
        return list(self.tokenizer.encode(prompt, add_special_tokens=add_special_tokens))

    def decode(self, token_ids: list[int]) -> str:
        if self.tokenizer is None:
            raise bad_request("this server runs without a tokenizer: it cannot detokenize", "tokens")
        return self.tokenizer.decode(token_ids)  # type: ignore[return-value]  # one sequence is one str; transformers types no overloads

    def output_limit(self, prompt_len: int, asked: int | None, param: str = "max_tokens") -> int:
        """vLLM's max_tokens: what was asked (else the generation config's), capped by the room
        max_model_len leaves after the prompt (no limit at all: all of that room). A prompt that
        leaves no room is a 400."""
        if prompt_len >= self.max_model_len:
            raise bad_request(
                f"This model's maximum context length is {self.max_model_len} tokens. However, your prompt "
                f"contains {prompt_len} input tokens, which leaves no room for any output tokens. "
                f"Please reduce the length of the input prompt.",
                "input_tokens",
            )
        room = self.max_model_len - prompt_len
        if asked is None and (default := self.default_sampling.get("max_tokens")) is not None:
            asked = int(default)  # a generation config's max_new_tokens
        if asked is None:
            return room
        if isinstance(asked, bool) or asked < 1:
            raise bad_request(f"{param} must be at least 1, got {asked}", param)
        return min(asked, room)

    def stop_reason(self, c: CompletionOutput, params: SamplingParams) -> str | int | None:
        """The stop string or stop token that ended `c`; None for EOS and other endings (vLLM)."""
        reason = c.stop_reason
        if reason in self.eos_token_ids and reason not in (params.stop_token_ids or ()):
            return None
        return reason


EMBEDDED_ALIAS = "default"  # what the embedded model is asked for by (--model default); requests may send it too


def default_served_name(engine) -> str:
    """The name served when --served-model-name is not given: the model as asked, and the embedded
    model under its directory path, as vLLM serves a local model under its path (clients that load a
    tokenizer by the served name, as `vllm bench serve`, find it there)."""
    if engine.model_name == EMBEDDED_ALIAS and engine.info.model_dir:
        return engine.info.model_dir
    return engine.model_name


RANDOM_ID_BYTES = 5  # a random request id's size: 10 hex digits, short enough to read on a dashboard


def request_id_base(raw: Request, given: str | None) -> str:
    """The request id's base: the X-Request-Id header, else the body's request_id, else random (as
    vLLM, which takes 32 hex digits; ids need only be unique among live requests)."""
    return raw.headers.get("X-Request-Id") or given or secrets.token_hex(RANDOM_ID_BYTES)
