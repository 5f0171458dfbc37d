"""The roofline model beside published vLLM GPU results: `python -m enginetui.simulate.published`.

Each `PublishedResult` is one figure someone measured with vLLM on a named accelerator (model,
workload, request rate, engine flags, the figure and where it was published); `compare` simulates
the same setting with the roofline model and gives the relative error. PUBLISHED lists the results
this project has checked sources for; it is empty until a source that names the accelerator, the
workload and the figure together is found (see the README's "Simulate" section).
"""

import math
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class PublishedResult:
    """One published vLLM measurement."""

    source: str  # where it was published (a URL, and the table or line)
    model: str  # a shipped config name or config.json directory
    hardware: str  # h100, h200, ...
    tensor_parallel_size: int  # GPUs
    dataset: str  # "sharegpt" or "random"
    num_prompts: int  # requests in the run
    request_rate: float  # requests per second (inf: all at once)
    metric: str  # a Summary field: "output_throughput", "request_throughput", or "ttft.p50", "tpot.p50", ...
    value: float  # the published figure, in the Summary field's unit (tok/s, req/s, ms)
    input_len: int = 1024  # random workloads: prompt length
    output_len: int = 128  # random workloads: output length
    engine_flags: dict = field(default_factory=dict)  # the run's vLLM flags that differ from the defaults


PUBLISHED: tuple[PublishedResult, ...] = ()  # none yet: see the module docstring


@dataclass(frozen=True, slots=True)
class Comparison:
    """A published figure and the simulator's prediction of it."""

    published: PublishedResult  # what was measured
    predicted: float  # what the roofline model predicts, same unit
    error_pct: float  # (predicted - published) / published, in percent


def metric_of(summary, metric: str) -> float:
    """A Summary figure by name: "output_throughput", or "ttft.p50" for a latency percentile."""
    value = summary
    for part in metric.split("."):
        value = getattr(value, part)
    return float(value)


def compare(result: PublishedResult, **roofline) -> Comparison:
    """Simulate `result`'s setting with the roofline model (`roofline`: mfu, mbu, overhead_ms)."""
    from enginetui.simulate.api import simulate

    sim = simulate(model=result.model, hardware=result.hardware, tensor_parallel_size=result.tensor_parallel_size,
                   dataset=result.dataset, num_prompts=result.num_prompts, request_rate=result.request_rate,
                   input_len=result.input_len, output_len=result.output_len, **roofline, **result.engine_flags)
    predicted = metric_of(sim.summary, result.metric)
    return Comparison(result, predicted, (predicted - result.value) / result.value * 100)


def comparison_table(comparisons: list[Comparison]) -> str:
    lines = ["| model | hardware | workload | rate | figure | published | predicted | error | source |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for c in comparisons:
        p = c.published
        rate = "inf" if math.isinf(p.request_rate) else f"{p.request_rate:g}"
        lines.append(f"| {p.model} | {p.tensor_parallel_size}x {p.hardware} | {p.dataset}, {p.num_prompts} | {rate} | "
                     f"{p.metric} | {p.value:g} | {c.predicted:.4g} | {c.error_pct:+.0f}% | {p.source} |")
    return "\n".join(lines)


if __name__ == "__main__":
    if not PUBLISHED:
        print("no published result is listed yet (enginetui/simulate/published.py: PUBLISHED)")
    else:
        print(comparison_table([compare(r) for r in PUBLISHED]))
