"""Sampling settings the prompt bar applies to new requests, and the `/set` command that edits them."""

import codecs
import shlex
from dataclasses import asdict, dataclass, replace
from typing import Any

# `/set NAME VALUE` accepts these names (and a few short aliases) for the fields below.
_ALIASES = {
    "max": "max_tokens",
    "max_tokens": "max_tokens",
    "temp": "temperature",
    "temperature": "temperature",
    "top_p": "top_p",
    "topp": "top_p",
    "top_k": "top_k",
    "topk": "top_k",
    "seed": "seed",
    "stop": "stop",
}
SETTING_NAMES = ("max", "temp", "top-p", "top-k", "seed", "stop")
_CLEAR = ("-", "none", "off")


@dataclass(frozen=True, slots=True)
class SamplingSettings:
    """What the next submitted prompt (or burst) is sampled with; mirrors SamplingParams."""

    max_tokens: int = 64  # generation limit per request
    temperature: float = 0.8  # 0 = greedy
    top_p: float = 0.95  # nucleus mass kept (1 = off)
    top_k: int = 0  # keep the k most likely tokens (0 = off)
    seed: int | None = None  # per-request sampling seed (None = engine's generator)
    stop: tuple[str, ...] = ()  # stop strings
    ignore_eos: bool = False  # keep generating past EOS (bursts set it; not shown or /set-able)

    def summary(self) -> str:
        """One line for the settings bar."""
        seed = "-" if self.seed is None else str(self.seed)
        stop = " ".join(repr(s) for s in self.stop) if self.stop else "-"
        return (
            f"max {self.max_tokens} · temp {self.temperature:g} · top-p {self.top_p:g} · "
            f"top-k {self.top_k} · seed {seed} · stop {stop}"
        )

    def as_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `SamplingParams`."""
        kwargs = asdict(self)
        kwargs["stop"] = list(self.stop) or None
        return kwargs


def apply_set_command(settings: SamplingSettings, args: str) -> SamplingSettings:
    """Apply the arguments of `/set NAME VALUE...`; raises ValueError with a readable message."""
    try:
        words = shlex.split(args)
    except ValueError as exc:
        raise ValueError(f"cannot parse '{args}': {exc}") from None
    if len(words) < 2:
        raise ValueError(f"usage: /set {'|'.join(SETTING_NAMES)} VALUE")
    name = _ALIASES.get(words[0].lower().replace("-", "_"))
    if name is None:
        raise ValueError(f"unknown setting '{words[0]}' (one of: {', '.join(SETTING_NAMES)})")
    values = words[1:]
    if name == "stop":
        stops = () if values[0].lower() in _CLEAR else tuple(_unescape(v) for v in values)
        return replace(settings, stop=stops)
    if len(values) != 1:
        raise ValueError(f"/set {words[0]} takes one value")
    value = values[0]
    if name == "seed":
        return replace(settings, seed=None if value.lower() in _CLEAR else _number(int, name, value))
    if name in ("max_tokens", "top_k"):
        number: float = _number(int, name, value)
    else:
        number = _number(float, name, value)
    checks = {
        "max_tokens": (number >= 1, "max tokens must be at least 1"),
        "temperature": (number >= 0, "temperature must be >= 0"),
        "top_p": (0 < number <= 1, "top-p must be in (0, 1]"),
        "top_k": (number >= 0, "top-k must be >= 0 (0 = off)"),
    }
    ok, message = checks[name]
    if not ok:
        raise ValueError(message)
    change: dict[str, Any] = {name: number}
    return replace(settings, **change)


def _number(kind: type, name: str, text: str) -> Any:
    try:
        return kind(text)
    except ValueError:
        raise ValueError(f"{name} needs {'an integer' if kind is int else 'a number'}, got '{text}'") from None


def _unescape(text: str) -> str:
    """Turn typed escapes (`\\n`, `\\t`) into the characters they name."""
    return codecs.decode(text, "unicode_escape")
