"""`--sweep NAME=v1,v2,...`: the same simulation at several values of one setting (an engine flag, the
request rate, any SimSettings field), as a table and a matplotlib plot of the trade-off."""

import dataclasses
import math
from dataclasses import dataclass

from enginetui.plural import count
from enginetui.simulate.api import SimResult, SimSettings, check_fleet, simulate


@dataclass(frozen=True, slots=True)
class Sweep:
    """One setting and its values."""

    name: str  # the SimSettings field or EngineConfig field (dashes or underscores, leading -- allowed)
    values: list  # the values, parsed (int, float, bool, inf or text)


def parse_sweep(text: str) -> Sweep:
    name, sep, values = text.partition("=")
    name = name.strip().lstrip("-").replace("-", "_")
    parts = [v.strip() for v in values.split(",") if v.strip()]
    if not sep or not name or not parts:
        raise ValueError(f"--sweep {text!r}: write NAME=v1,v2,... (e.g. max_num_seqs=64,128,256)")
    from enginetui.core.config import EngineConfig

    if name not in SimSettings.__dataclass_fields__ and name not in EngineConfig.__dataclass_fields__:
        raise ValueError(f"--sweep: {name!r} is neither an engine flag nor a simulate setting")
    return Sweep(name, [_value(p) for p in parts])


def _value(text: str):
    low = text.lower()
    if low in ("true", "on", "yes"):
        return True
    if low in ("false", "off", "no"):
        return False
    if low in ("inf", "infinity"):
        return math.inf
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def run_sweep(sweep: Sweep, settings: SimSettings, flags: dict, on_result=None) -> list[SimResult]:
    """One simulation per value (`on_result(result)` after each); every value's fleet is checked before the first
    runs."""
    if sweep.name in SimSettings.__dataclass_fields__:
        for value in sweep.values:
            check_fleet(dataclasses.replace(settings, **{sweep.name: value}))
    results = []
    for value in sweep.values:
        result = simulate(settings, **{**flags, sweep.name: value})
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results


def sweep_table(sweep: Sweep, results: list[SimResult]) -> str:
    goodput = any(r.summary.goodput is not None for r in results)
    refused = [(value, r.summary) for value, r in zip(sweep.values, results) if r.summary.num_rejected]
    head = (
        f"{sweep.name:>22} {'req/s':>8} {'out tok/s':>10} {'TTFT p50':>9} {'TTFT p99':>9} {'TPOT p50':>9} "
        f"{'TPOT p99':>9} {'preempt':>8} {'KV max':>7}"
        + (f" {'goodput':>8}" if goodput else "")
        + (f" {'rejected':>8}" if refused else "")
    )
    lines = [head]
    for value, r in zip(sweep.values, results):
        m = r.summary
        line = (
            f"{value!s:>22} {m.request_throughput:>8.2f} {m.output_throughput:>10.1f} {m.ttft.p50:>9.1f} "
            f"{m.ttft.p99:>9.1f} {m.tpot.p50:>9.2f} {m.tpot.p99:>9.2f} {m.num_preemptions:>8} "
            f"{m.kv_usage_max:>7.0%}"
        )
        lines.append(line + (f" {m.goodput:>8.2f}" if goodput else "") + (f" {m.num_rejected:>8}" if refused else ""))
    lines.append(
        "(latencies in ms; nan: no request completed)"
        if any(not r.summary.num_completed for r in results)
        else "(latencies in ms)"
    )
    lines += [
        f"rejected at {sweep.name}={value}: {m.num_rejected} never fit, the first: {m.first_rejection}"
        for value, m in refused
    ]
    return "\n".join(lines)


SLO_ATTAINMENT = 0.9  # a run meets its SLOs when this share of its requests meets every one


def attainment(result: SimResult) -> float:
    """The share of the run's requests that met every SLO (nan: no SLO named, or no request)."""
    m = result.summary
    if m.goodput is None or not m.num_requests or not m.duration_s > 0:
        return float("nan")
    return m.goodput * m.duration_s / m.num_requests


def smallest_meeting(sweep: Sweep, results: list[SimResult]) -> str:
    """The line naming the first value of the sweep (the smallest fleet, for replicas) whose run meets the
    SLOs, or saying none did."""
    rates = [attainment(r) for r in results]
    slos = ", ".join(f"{k} <= {v:g} ms" for k, v in results[0].summary.slos_ms.items())
    need = f"{slos}; {SLO_ATTAINMENT:.0%} needed"
    for value, rate in zip(sweep.values, rates):
        if rate >= SLO_ATTAINMENT:
            what = count(value, "replica") if sweep.name == "replicas" else f"{sweep.name}={value}"
            return f"smallest      {what}: {rate:.1%} of requests met every SLO ({need})"
    return f"smallest      none of these: at best {max(rates):.1%} of requests met every SLO ({need})"


def sweep_title(sweep: Sweep, results: list[SimResult]) -> str:
    """The plot's title: what was simulated and what was swept."""
    return f"enginetui simulate: {results[0].settings.model} on {results[0].step_model}, sweep of {sweep.name}"


def plot_sweep(sweep: Sweep, results: list[SimResult], path: str) -> None:
    """Throughput and latency percentiles against the swept value, in one PNG (or any matplotlib format)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in sweep.values)
    xs = sweep.values if numeric else list(range(len(sweep.values)))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 7), sharex=True)
    top.plot(xs, [r.summary.output_throughput for r in results], "o-", label="output tok/s")
    if any(r.summary.goodput is not None for r in results):
        twin = top.twinx()
        twin.plot(xs, [r.summary.goodput for r in results], "s--", color="tab:green", label="goodput req/s")
        twin.set_ylabel("goodput (req/s)")
    top.set_ylabel("output tokens/s")
    top.ticklabel_format(axis="y", useOffset=False)
    top.set_ylim(bottom=0)
    top.set_title(sweep_title(sweep, results))
    for name, pick in (
        ("TTFT p50", lambda m: m.ttft.p50),
        ("TTFT p99", lambda m: m.ttft.p99),
        ("TPOT p50", lambda m: m.tpot.p50),
        ("TPOT p99", lambda m: m.tpot.p99),
    ):
        bottom.plot(xs, [pick(r.summary) for r in results], "o-", label=name)
    bottom.set_yscale("log")
    bottom.set_ylabel("ms")
    bottom.set_xlabel(sweep.name)
    bottom.legend()
    if not numeric:
        bottom.set_xticks(xs, [str(v) for v in sweep.values])
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
