"""Goodput of a benchmark pass: requests per second that met every SLO, as `vllm bench serve
--goodput ttft:MS tpot:MS e2el:MS` counts them (the SLO names and their parsing are the simulator's)."""

from enginetui.bench.latency import RequestTiming


def request_slos(goodput: list[str] | None) -> dict[str, float]:
    """--goodput NAME:MS ... -> {"ttft": ms, "tpot": ms, "e2e": ms} (those named)."""
    from enginetui.simulate.summary import parse_slos

    return parse_slos(" ".join(goodput or []))


def goodput(timings: list[RequestTiming], duration: float, slos_ms: dict[str, float]) -> float | None:
    """Requests per second of `duration` that met every SLO (a one-token request has no TPOT and
    passes that one); None without SLOs."""
    if not slos_ms:
        return None
    good = 0
    for t in timings:
        tpot = (t.done - t.token_times[0]) * 1e3 / (t.num_output_tokens - 1) if t.num_output_tokens > 1 else 0.0
        measured = {"ttft": (t.token_times[0] - t.sent) * 1e3, "tpot": tpot, "e2e": (t.done - t.sent) * 1e3}
        good += all(measured[name] <= limit for name, limit in slos_ms.items())
    return good / duration
