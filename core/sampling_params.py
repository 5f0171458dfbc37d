"""Sampling parameters of one request, validated when built."""

import msgspec

_INT_FIELDS = ("n", "top_k", "max_tokens", "min_tokens", "logprobs", "seed", "stream_interval")
_NULLABLE_FIELDS = ("max_tokens", "logprobs", "seed", "stream_interval")  # None is a valid value for these
_FLOAT_FIELDS = ("temperature", "top_p", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty")


class SamplingParams(msgspec.Struct, kw_only=True, omit_defaults=True):
    """How to pick the next token and when to stop. Mirrors vLLM's SamplingParams."""

    n: int = 1  # completions per prompt (parallel sampling: each one its own engine request)
    temperature: float = 1.0  # 0 means greedy
    top_p: float = 1.0  # keep the smallest set of tokens whose probability reaches top_p
    top_k: int = 0  # keep the k most likely tokens; 0 or -1 keeps all
    min_p: float = 0.0  # drop tokens below min_p * p(most likely token)
    seed: int | None = None  # per-request RNG seed: same seed, same tokens, whatever the batch
    presence_penalty: float = 0.0  # subtracted once from the logit of every token already generated
    frequency_penalty: float = 0.0  # subtracted per occurrence of a generated token
    repetition_penalty: float = 1.0  # divides positive / multiplies negative logits of seen tokens
    max_tokens: int | None = 16  # generation limit; None means up to max_model_len
    min_tokens: int = 0  # EOS and stop_token_ids are suppressed until this many tokens exist
    stop: list[str] | None = None  # stop strings; the text is cut before them
    stop_token_ids: list[int] | None = None  # token ids that end generation
    ignore_eos: bool = False  # keep generating past EOS
    include_stop_str_in_output: bool = False  # keep the matched stop string in the text
    logprobs: int | None = None  # return this many top logprobs per generated token (plus the sampled one)
    skip_special_tokens: bool = True  # drop special tokens when detokenizing
    # Streamed outputs carry this many new tokens at least (the first and the last at once); raises
    # the engine's --stream-interval for this request, never lowers it. None: the engine's.
    stream_interval: int | None = None

    def __post_init__(self) -> None:
        self._check_types()
        if self.n < 1:
            raise ValueError(f"n must be at least 1, got {self.n}")
        if not 0.0 <= self.temperature <= 100.0:
            raise ValueError(f"temperature must be in [0, 100], got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < -1:
            raise ValueError(f"top_k must be -1 (disable), 0 (disable) or positive, got {self.top_k}")
        if not 0.0 <= self.min_p <= 1.0:
            raise ValueError(f"min_p must be in [0, 1], got {self.min_p}")
        for name in ("presence_penalty", "frequency_penalty"):
            if not -2.0 <= getattr(self, name) <= 2.0:
                raise ValueError(f"{name} must be in [-2, 2], got {getattr(self, name)}")
        if not 0.0 < self.repetition_penalty <= 10.0:
            raise ValueError(f"repetition_penalty must be in (0, 10], got {self.repetition_penalty}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {self.max_tokens}")
        if self.min_tokens < 0:
            raise ValueError(f"min_tokens must be non-negative, got {self.min_tokens}")
        if self.max_tokens is not None and self.min_tokens > self.max_tokens:
            raise ValueError(f"min_tokens ({self.min_tokens}) must not exceed max_tokens ({self.max_tokens})")
        if self.logprobs is not None and not 0 <= self.logprobs <= 20:
            raise ValueError(f"logprobs must be in [0, 20], got {self.logprobs}")
        if self.seed is not None and not 0 <= self.seed < 2**63:
            raise ValueError(f"seed must be in [0, 2**63), got {self.seed}")
        if self.stream_interval is not None and self.stream_interval < 1:
            raise ValueError(f"stream_interval must be at least 1, got {self.stream_interval}")
        self._check_stops()

    def _check_types(self) -> None:
        for name in _INT_FIELDS:
            value = getattr(self, name)
            if value is None and name in _NULLABLE_FIELDS:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be an integer, got {value!r}")
        for name in _FLOAT_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
                raise ValueError(f"{name} must be a number, got {value!r}")
            setattr(self, name, float(value))
        for name in ("ignore_eos", "include_stop_str_in_output", "skip_special_tokens"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool, got {getattr(self, name)!r}")

    def _check_stops(self) -> None:
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        if self.stop is not None:
            if not isinstance(self.stop, list) or not all(isinstance(s, str) for s in self.stop):
                raise ValueError(f"stop must be a string or a list of strings, got {self.stop!r}")
            if any(s == "" for s in self.stop):
                raise ValueError("stop strings must not be empty")
            for s in self.stop:
                try:
                    s.encode("utf-8")
                except UnicodeEncodeError as exc:
                    raise ValueError(f"stop string {s!r} is not valid UTF-8") from exc
        if self.stop_token_ids is not None:
            if not isinstance(self.stop_token_ids, list) or not all(
                isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in self.stop_token_ids
            ):
                raise ValueError(f"stop_token_ids must be a list of non-negative ints, got {self.stop_token_ids!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0
