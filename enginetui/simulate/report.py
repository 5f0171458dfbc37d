"""A simulated run as text: what was simulated, then the figures (vllm bench serve's layout)."""

import math

from enginetui.simulate.api import SimResult
from enginetui.simulate.metrics import Latency, Summary
from enginetui.simulate.traces import TRACE_DATASETS


def _model_line(result: SimResult) -> str:
    """The model simulated, and where its step times come from."""
    s = result.settings
    if s.from_recording:
        return "the recorded engine's"
    if s.step_times != "roofline":
        return s.model
    tp = f"{s.tensor_parallel_size}x " if s.tensor_parallel_size > 1 else ""
    return f"{s.model}, {s.weight_dtype} weights, on {tp}{s.hardware}"


def describe_setup(result: SimResult) -> list[str]:
    s, c = result.settings, result.config
    rate = "all at once" if math.isinf(s.request_rate) else f"{s.request_rate:g} req/s"
    if s.from_recording:
        source = f"recording {s.from_recording}: its {result.summary.num_requests} requests, arriving as recorded"
    elif s.trace or s.dataset in TRACE_DATASETS:
        window = f", seconds {s.trace_window} of it" if s.trace_window else ""
        scale = f", {s.time_scale:g}x as fast" if s.time_scale != 1 else ""
        source = (f"trace {s.trace or s.dataset}{window}: {result.summary.num_requests} requests arriving as "
                  f"traced{scale}")
    else:
        source = f"{s.dataset}, {s.num_prompts} prompts, {rate}, seed {s.seed}"
    lines = [f"model         {_model_line(result)}",
             f"workload      {source}",
             f"step times    {result.step_model}",
             f"KV pool       {result.pool.describe() if result.pool else f'{result.num_blocks} blocks'} "
             f"of {c.block_size} tokens",
             f"engine        max_num_batched_tokens {c.max_num_batched_tokens}, max_num_seqs {c.max_num_seqs}, "
             f"chunked prefill {'on' if c.enable_chunked_prefill else 'off'}, prefix caching "
             f"{'on' if c.enable_prefix_caching else 'off'}, {c.scheduling_policy}"]
    return lines + [f"note          {n}" for n in result.notes]


def _row(name: str, lat: Latency) -> str:
    return f"{name:<10}{lat.mean:>12.2f}{lat.p50:>12.2f}{lat.p90:>12.2f}{lat.p99:>12.2f}"


def _rejected(m: Summary) -> str:
    """The requests line's rejections, `, N rejected (never fit; why)`: empty when there were none."""
    if not m.num_rejected:
        return ""
    which = "" if m.num_rejected == 1 else "the first: "
    return f", {m.num_rejected} rejected (never fit; {which}{m.first_rejection})"


def _hit_rate(m: Summary) -> str:
    """The prefix cache's hit rate as vLLM counts it (prompt tokens of first admissions found cached)."""
    if not m.prefix_queries:
        return "no lookups"
    return f"{m.prefix_hits / m.prefix_queries:.1%} hit rate ({m.prefix_hits} of {m.prefix_queries} prompt tokens)"


def format_summary(result: SimResult) -> str:
    m = result.summary
    requests = f"requests      {m.num_completed} completed of {m.num_requests}" + _rejected(m)
    lines = describe_setup(result) + ["", requests]
    if not m.num_completed:
        return "\n".join(lines + ["", "no request completed: no throughput or latency to report"])
    lines += [
        f"duration      {m.duration_s:.2f} s simulated in {m.wall_seconds:.1f} s, {m.num_steps} steps",
        f"throughput    {m.request_throughput:.2f} req/s, {m.output_throughput:.1f} output tok/s, "
        f"{m.total_token_throughput:.1f} total tok/s",
    ]
    if m.goodput is not None:
        slos = ", ".join(f"{k} <= {v:g} ms" for k, v in m.slos_ms.items())
        lines.append(f"goodput       {m.goodput:.2f} req/s ({slos})")
    if result.config.enable_prefix_caching:
        lines.append(f"prefix cache  {_hit_rate(m)}")
    lines += [
        f"KV usage      mean {m.kv_usage_mean:.0%}, max {m.kv_usage_max:.0%}; {m.num_preemptions} preemptions",
        f"queues        at most {m.max_running} running, {m.max_waiting} waiting",
        "",
        f"{'ms':<10}{'mean':>12}{'p50':>12}{'p90':>12}{'p99':>12}",
        _row("TTFT", m.ttft), _row("TPOT", m.tpot), _row("ITL", m.itl), _row("E2E", m.e2e),
    ]
    return "\n".join(lines)
