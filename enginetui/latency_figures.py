"""Latency figures and goodput as `vllm bench serve` defines them, for `enginetui bench` and `enginetui simulate`.

TTFT: first token - arrival. TPOT: (e2e - TTFT) / (output tokens - 1), per request with more than one token.
ITL: every gap between consecutive tokens of a request. E2E: finish - arrival. Goodput: completed requests per
second that met every named SLO (`--goodput ttft:500 tpot:50 e2el:10000`, milliseconds, vLLM's names).
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

PERCENTILES = (50, 90, 99)  # reported for every latency
SLO_NAMES = {"ttft": "ttft", "tpot": "tpot", "e2el": "e2e", "e2e": "e2e", "itl": "tpot"}  # vLLM's names too


@dataclass(frozen=True, slots=True)
class Latency:
    """One latency's distribution, milliseconds (NaN where there were no samples)."""

    mean: float  # mean
    p50: float  # median
    p90: float  # 90th percentile
    p99: float  # 99th percentile
    count: int  # samples
    samples: list[float] = field(default_factory=list)  # every sample, ascending, when kept (bench's --plot CDFs)

    @classmethod
    def of(cls, values_ms: Sequence[float] | np.ndarray, keep_samples: bool = False) -> "Latency":
        ms = np.asarray(values_ms, dtype=np.float64)
        if ms.size == 0:
            return cls(math.nan, math.nan, math.nan, math.nan, 0)
        p50, p90, p99 = np.percentile(ms, PERCENTILES)
        kept = np.sort(ms).tolist() if keep_samples else []
        return cls(float(ms.mean()), float(p50), float(p90), float(p99), int(ms.size), kept)


def parse_slos(text: str | Sequence[str] | None) -> dict[str, float]:
    """`ttft:500 tpot:50` (or comma-separated, or the flag's words) -> {"ttft": 500.0, "tpot": 50.0}, milliseconds."""
    words = text if isinstance(text, str) or text is None else " ".join(text)
    slos: dict[str, float] = {}
    for part in (words or "").replace(",", " ").split():
        name, _, value = part.partition(":")
        if name.lower() not in SLO_NAMES:
            raise ValueError(f"unknown SLO {name!r}: use ttft, tpot or e2el, e.g. ttft:500")
        try:
            slos[SLO_NAMES[name.lower()]] = float(value)
        except ValueError:
            raise ValueError(f"SLO {part!r}: the value must be milliseconds, e.g. ttft:500") from None
    return slos


def goodput(
    slos_ms: dict[str, float],
    duration_s: float,
    ttft_ms: Sequence[float] | np.ndarray,
    tpot_ms: Sequence[float] | np.ndarray,
    e2e_ms: Sequence[float] | np.ndarray,
) -> float | None:
    """Requests per second of `duration_s` that met every SLO, from each completed request's TTFT, TPOT and E2E
    (index-aligned; a one-token request's TPOT is NaN: it has none, and passes that SLO); None without SLOs."""
    if not slos_ms:
        return None
    measured = {
        name: np.asarray(v, dtype=np.float64) for name, v in (("ttft", ttft_ms), ("tpot", tpot_ms), ("e2e", e2e_ms))
    }
    ok = np.ones(len(measured["ttft"]), dtype=bool)  # [requests]
    for name, limit in slos_ms.items():
        ok &= ~(measured[name] > limit)
    return float(ok.sum()) / duration_s if duration_s > 0 else math.nan
