"""A simulated run as text: what was simulated, then the figures (vllm bench serve's layout)."""

import math
from collections.abc import Sequence

from enginetui.latency_figures import Latency
from enginetui.plural import count
from enginetui.simulate.api import SimResult
from enginetui.simulate.summary import Summary
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


def _pool_text(result: SimResult) -> str:
    pools = result.fleet.num_blocks if result.fleet else []
    if len(set(pools)) > 1:
        return f"per replica {', '.join(map(str, pools))} blocks"
    return result.pool.describe() if result.pool else f"{result.num_blocks} blocks"


def describe_setup(result: SimResult, sweep=None) -> list[str]:
    """What was simulated; `sweep` (sweep.Sweep): the setting a sweep varied, its every value named."""
    s, c = result.settings, result.config
    rate = "all at once" if math.isinf(s.request_rate) else f"{s.request_rate:g} req/s"
    if sweep is not None and sweep.name == "request_rate":
        rate = "at " + ", ".join("all at once" if math.isinf(v) else f"{v:g}" for v in sweep.values) + " req/s"
    if s.from_recording:
        source = f"recording {s.from_recording}: its {result.summary.num_requests} requests, arriving as recorded"
    elif s.trace or s.dataset in TRACE_DATASETS:
        window = f", seconds {s.trace_window} of it" if s.trace_window else ""
        scale = f", {s.time_scale:g}x as fast" if s.time_scale != 1 else ""
        source = (
            f"trace {s.trace or s.dataset}{window}: {result.summary.num_requests} requests arriving as traced{scale}"
        )
    else:
        source = f"{s.dataset}, {s.num_prompts} prompts, {rate}, seed {s.seed}"
    lines = [
        f"model         {_model_line(result)}",
        f"workload      {source}",
        f"step times    {result.step_model}",
        f"KV pool       {_pool_text(result)} of {c.block_size} tokens",
        f"engine        max_num_batched_tokens {c.max_num_batched_tokens}, max_num_seqs {c.max_num_seqs}, "
        f"chunked prefill {'on' if c.enable_chunked_prefill else 'off'}, prefix caching "
        f"{'on' if c.enable_prefix_caching else 'off'}, {c.scheduling_policy}",
    ]
    if s.prefill_replicas:
        lines.append(
            f"fleet         disaggregated: {count(s.prefill_replicas, 'prefill replica')} behind "
            f"{s.prefill_policy or s.router}, {count(s.decode_replicas, 'decode replica')} behind "
            f"{s.decode_policy or s.router}; KV over {s.kv_transfer_bandwidth:g} GB/s"
        )
    elif s.replicas > 1 or (sweep is not None and sweep.name in ("replicas", "router")):
        lines.append(
            f"fleet         {count(s.replicas, 'replica')} behind {s.router}"
            if sweep is None
            else f"fleet         behind {s.router}"
            if sweep.name == "replicas"
            else f"fleet         {count(s.replicas, 'replica')}"
        )
    if sweep is not None:
        lines.append(f"sweep         {sweep.name} = {', '.join(str(v) for v in sweep.values)}")
    return lines + [f"note          {n}" for n in result.notes]


def _row(name: str, lat: Latency) -> str:
    return f"{name:<10}{lat.mean:>12.2f}{lat.p50:>12.2f}{lat.p90:>12.2f}{lat.p99:>12.2f}"


def _rejected(m: Summary) -> str:
    """The requests line's rejections, `, N rejected (never fit; why)`: empty when there were none."""
    if not m.num_rejected:
        return ""
    which = "" if m.num_rejected == 1 else "the first: "
    return f", {m.num_rejected} rejected (never fit; {which}{m.first_rejection})"


def _shares_prefixes(s) -> bool:
    """Whether the workload's prompts share prefixes on purpose (what prefix caching would reuse)."""
    return not s.from_recording and (s.dataset in ("shared-prefix", "mooncake") and not s.trace)


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
    elif _shares_prefixes(result.settings):
        lines.append("prefix cache  off: the shared prefixes are computed again each time (--enable-prefix-caching)")
    lines += [
        f"KV usage      mean {m.kv_usage_mean:.0%}, max {m.kv_usage_max:.0%}; {m.num_preemptions} preemptions",
        f"queues        at most {m.max_running} running, {m.max_waiting} waiting",
        "",
        f"{'ms':<10}{'mean':>12}{'p50':>12}{'p90':>12}{'p99':>12}",
        _row("TTFT", m.ttft),
        _row("TPOT", m.tpot),
        _row("ITL", m.itl),
        _row("E2E", m.e2e),
    ]
    if result.fleet is not None:
        lines += [""] + format_fleet(result)
    return "\n".join(lines)


def load_imbalance(values: Sequence[float]) -> float:
    """The busiest replica's share against an even one: max / mean (1: even; nan: nothing to share)."""
    mean = sum(values) / len(values) if values else 0.0
    return max(values) / mean if mean > 0 else float("nan")


def format_fleet(result: SimResult) -> list[str]:
    """The fleet's spread and each replica's figures (disaggregated: per pool, and the KV transfers)."""
    fleet = result.fleet
    if fleet is None:
        raise ValueError("format_fleet needs a fleet's result")
    roles = fleet.roles or ["replica"] * len(fleet.runs)
    if "prefill" in roles:
        return _format_pools(result, roles)
    counts = [s.num_requests for s in fleet.summaries]
    tokens = [sum(r.prompt_len + r.output_len for r in run.requests) for run in fleet.runs]
    lines = [
        f"imbalance     the busiest replica against the mean: requests {load_imbalance(counts):.2f}x, "
        f"tokens {load_imbalance(tokens):.2f}x",
        "",
    ]
    return lines + _replica_rows(result, range(len(roles)), "replica")


def _replica_rows(result: SimResult, which, name: str) -> list[str]:
    """A row per replica of `which` (indices into the fleet): its latencies, cache, KV and goodput."""
    fleet = result.fleet
    assert fleet is not None
    goodput = result.summary.goodput is not None
    lines = [
        f"{name:<8}{'requests':>9}{'TTFT p50':>10}{'TTFT p99':>10}{'TPOT p50':>10}{'TPOT p99':>10}"
        f"{'ITL p50':>9}{'E2E p50':>10}{'E2E p99':>10}{'prefix hit':>11}{'KV max':>8}{'preempt':>8}"
        + (f"{'goodput':>9}" if goodput else ""),
    ]
    for k in which:
        m = fleet.summaries[k]
        hit = f"{m.prefix_hits / m.prefix_queries:.1%}" if m.prefix_queries else "-"
        line = (
            f"{k:<8}{m.num_requests:>9}{m.ttft.p50:>10.1f}{m.ttft.p99:>10.1f}{m.tpot.p50:>10.2f}"
            f"{m.tpot.p99:>10.2f}{m.itl.p50:>9.2f}{m.e2e.p50:>10.1f}{m.e2e.p99:>10.1f}{hit:>11}"
            f"{m.kv_usage_max:>8.0%}{m.num_preemptions:>8}"
        )
        lines.append(line + (f"{m.goodput:>9.2f}" if m.goodput is not None else ""))
    lines.append("(ms; goodput: req/s over each replica's own duration)" if goodput else "(ms)")
    return lines


def _format_pools(result: SimResult, roles: list[str]) -> list[str]:
    """Disaggregated: the prefill pool (a request's time there: its wait and prefill), the KV transfers, the
    decode pool (the figures clients see: TTFT from the request's arrival at the fleet)."""
    import numpy as np

    fleet = result.fleet
    assert fleet is not None
    prefill = [k for k, role in enumerate(roles) if role == "prefill"]
    decode = [k for k, role in enumerate(roles) if role == "decode"]
    lines = [
        f"{'prefill':<8}{'requests':>9}{'in pool p50':>12}{'p90':>9}{'p99':>9}{'prefix hit':>11}{'KV max':>8}"
        f"{'preempt':>8}"
    ]
    for k in prefill:
        m = fleet.summaries[k]
        hit = f"{m.prefix_hits / m.prefix_queries:.1%}" if m.prefix_queries else "-"
        lines.append(
            f"{k:<8}{m.num_requests:>9}{m.e2e.p50:>12.1f}{m.e2e.p90:>9.1f}{m.e2e.p99:>9.1f}{hit:>11}"
            f"{m.kv_usage_max:>8.0%}{m.num_preemptions:>8}"
        )
    lines.append("(ms from arrival to the prompt's end on the prefill replica: its wait and prefill)")
    moved = np.asarray(fleet.transfer_seconds, dtype=np.float64) * 1e3  # [requests] ms
    if moved.size:
        p50, p99 = np.percentile(moved, (50, 99))
        lines += [
            "",
            f"KV transfer   mean {moved.mean():.2f} ms, p50 {p50:.2f}, p99 {p99:.2f} ms "
            f"(the prompt's KV over {result.settings.kv_transfer_bandwidth:g} GB/s)",
        ]
    counts = [fleet.summaries[k].num_requests for k in decode]
    lines += [
        f"imbalance     the busiest decode replica against the mean: requests {load_imbalance(counts):.2f}x",
        "",
    ]
    return lines + _replica_rows(result, decode, "decode")
