"""A simulated run's figures, defined as `vllm bench serve` defines them (enginetui/latency_figures.py, as the
benchmarks measure them); the run's duration: first arrival to last finish.
"""

from dataclasses import dataclass

import numpy as np

from enginetui.latency_figures import Latency, goodput
from enginetui.simulate.simulator import SimRun


@dataclass(frozen=True, slots=True)
class Summary:
    """The run's figures."""

    num_requests: int  # requests in the workload
    num_completed: int  # requests that finished
    num_rejected: int  # requests refused at admission (could never fit the pool)
    first_rejection: str  # why the first of them was refused ("" if none was)
    duration_s: float  # first arrival to last finish, simulated seconds
    request_throughput: float  # completed requests per second
    output_throughput: float  # generated tokens per second
    total_token_throughput: float  # prompt + generated tokens of completed requests per second
    ttft: Latency  # time to first token
    tpot: Latency  # time per output token after the first
    itl: Latency  # inter-token latency
    e2e: Latency  # arrival to finish
    goodput: float | None  # requests per second meeting every SLO (None: no SLO named)
    slos_ms: dict[str, float]  # the SLOs, by metric ("ttft", "tpot", "e2e")
    num_steps: int  # engine steps
    num_preemptions: int  # preemptions over the run
    kv_usage_mean: float  # mean share of the pool in use after a step (0..1)
    kv_usage_max: float  # highest share of the pool in use
    max_running: int  # most requests running at once
    max_waiting: int  # longest waiting queue
    wall_seconds: float  # how long simulating took on this machine
    prefix_queries: int = 0  # prompt tokens looked up in the prefix cache (first admissions)
    prefix_hits: int = 0  # of which found there


def summarize(run: SimRun, slos_ms: dict[str, float] | None = None) -> Summary:
    t = run.times
    arrival = np.frombuffer(t.arrival, dtype=np.float64)  # [n]
    first = np.frombuffer(t.first_token, dtype=np.float64)  # [n]
    finish = np.frombuffer(t.finish, dtype=np.float64)  # [n]
    outputs = np.frombuffer(t.num_output, dtype=np.int64).astype(np.float64)  # [n]
    done = ~np.isnan(finish) & (outputs > 0)  # [n] completed requests
    prompts = np.array([r.prompt_len for r in run.requests], dtype=np.float64)  # [n]
    ttft = (first - arrival)[done] * 1e3  # [completed]
    e2e = (finish - arrival)[done] * 1e3  # [completed]
    many = done & (outputs > 1)  # [n]
    tpot_all = np.full(len(arrival), np.nan)  # [n]
    tpot_all[many] = ((finish - first)[many] / (outputs[many] - 1)) * 1e3
    duration = float(finish[done].max() - arrival.min()) if done.any() else 0.0
    per_s = (lambda x: x / duration) if duration > 0 else (lambda x: float("nan"))  # noqa: E731
    slos_ms = slos_ms or {}
    tl = run.timeline
    kv = np.frombuffer(tl.kv_used_blocks, dtype=np.int64) / max(run.num_blocks, 1)  # [steps]
    return Summary(
        num_requests=len(arrival),
        num_completed=int(done.sum()),
        num_rejected=run.num_rejected,
        first_rejection=run.first_rejection,
        duration_s=duration,
        request_throughput=per_s(float(done.sum())),
        output_throughput=per_s(float(outputs[done].sum())),
        total_token_throughput=per_s(float(outputs[done].sum() + prompts[done].sum())),
        ttft=Latency.of(ttft),
        tpot=Latency.of(tpot_all[many]),
        itl=Latency.of(np.asarray(t.itl, dtype=np.float64) * 1e3),
        e2e=Latency.of(e2e),
        goodput=goodput(slos_ms, duration, ttft, tpot_all[done], e2e),
        slos_ms=dict(slos_ms),
        num_steps=len(tl.end),
        num_preemptions=int(sum(tl.num_preempted)),
        kv_usage_mean=float(kv.mean()) if kv.size else 0.0,
        kv_usage_max=float(kv.max()) if kv.size else 0.0,
        max_running=max(tl.num_running, default=0),
        max_waiting=max(tl.num_waiting, default=0),
        wall_seconds=run.wall_seconds,
        prefix_queries=run.prefix_queries,
        prefix_hits=run.prefix_hits,
    )
