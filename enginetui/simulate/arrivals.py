"""When requests arrive: all at once, a Poisson (or gamma, `burstiness`) process at a request rate as
`vllm bench serve` draws it, or in bursts of several requests at once."""

import math

import numpy as np

from enginetui.core.ceil_div import cdiv
from enginetui.simulate.workload import SimRequest


def arrival_times(
    num: int, request_rate: float, burstiness: float = 1.0, burst_size: int = 1, seed: int = 0
) -> np.ndarray:
    """`num` arrival times in seconds from 0, ascending.

    request_rate inf: all at 0. Otherwise gaps between bursts (groups of `burst_size` arriving
    together) are gamma-distributed with shape `burstiness` and mean burst_size / request_rate
    (burstiness 1: Poisson arrivals, vLLM's default); the first burst arrives at 0.
    """
    if not request_rate > 0:
        raise ValueError(f"request rate must be positive (inf: all at once), got {request_rate}")
    if not burstiness > 0:
        raise ValueError(f"burstiness must be positive, got {burstiness}")
    if burst_size < 1:
        raise ValueError(f"burst size must be at least 1, got {burst_size}")
    if math.isinf(request_rate):
        return np.zeros(num)  # [num]
    rng = np.random.default_rng(seed)
    num_bursts = cdiv(num, burst_size)
    mean_gap = burst_size / request_rate
    gaps = rng.gamma(shape=burstiness, scale=mean_gap / burstiness, size=num_bursts)  # [bursts]
    gaps[0] = 0.0
    starts = np.cumsum(gaps)  # [bursts]
    return np.repeat(starts, burst_size)[:num]  # [num]


def with_arrivals(requests: list[SimRequest], times: np.ndarray) -> list[SimRequest]:
    """Set each request's arrival (in order) and return them."""
    for request, t in zip(requests, times):
        request.arrival = float(t)
    return requests
