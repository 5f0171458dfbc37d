"""How benchmark results are shown: plain-text tables, the --json file, and the one-line summary
that every benchmark prints last."""

import argparse
import datetime
import os
from collections.abc import Sequence
from typing import Any

from enginetui.bench import saved_result
from enginetui.flags.engine import as_flags


def quiet_transformers() -> None:
    """No transformers progress bars between our tables (loading / saving weights)."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Right-aligned columns; floats with one decimal (three below 10)."""
    cells = [list(headers)] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in cells)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


def engine_settings(engine_args: dict[str, Any]) -> str:
    """The engine flags a run gave (the model is named apart), or that it took the engine's defaults."""
    flags = as_flags({k: v for k, v in engine_args.items() if k != "model"})
    return f"flags {' '.join(flags)}" if flags else "the engine's default flags"


def finish(result: Any, args: argparse.Namespace) -> None:
    """Write the run's record (enginetui/bench/saved_result.py) if asked: to --json PATH, and with
    --save-result into --result-dir; then print the result's summary (always the last line)."""
    if args.json or args.save_result:
        started = getattr(args, "started", None) or datetime.datetime.now(datetime.UTC)
        data = saved_result.record(result, args.bench_command, getattr(args, "argv", None), started)
        if args.json:
            saved_result.write(data, args.json)
            print(f"JSON written to {args.json}")
        if args.save_result:
            print(f"result saved to {saved_result.save(data, args.result_dir, args.result_filename)}")
    print(result.summary)


def workload_line(result: Any) -> str:
    w = result.workload
    if w.dataset == "sharegpt":
        return (
            f"workload sharegpt: {w.num_prompts} ShareGPT conversations (vLLM's filter: prompt {w.min_input_len}-"
            f"{w.max_input_len}, prompt + output at most {w.min_input_len + w.max_output_len}), seed {w.seed} "
            f"({result.prompt_tokens} prompt + {result.output_tokens} output tokens)"
        )
    prefix = f"{w.prefix_len}-token shared prefix + " if w.prefix_len else ""
    return (
        f"workload {w.name}: {w.num_prompts} prompts, input {prefix}{w.min_input_len}-{w.max_input_len}, "
        f"output {w.min_output_len}-{w.max_output_len}, seed {w.seed} "
        f"({result.prompt_tokens} prompt + {result.output_tokens} output tokens)"
    )


# ---- throughput ----------------------------------------------------------------------------


def print_throughput(result) -> None:
    print(workload_line(result) + f", temperature {result.temperature:g}")
    print(f"engine: {result.model} on {result.device} ({result.dtype}), {engine_settings(result.engine_args)}")
    rows = []
    for r in result.runs:
        s, d = r.steps, r.dashboard
        rows.append(
            [
                r.events,
                r.competing,
                r.repeat,
                r.elapsed_s,
                r.requests_per_s,
                r.total_tokens_per_s,
                r.output_tokens_per_s,
                r.cached_prompt_tokens,
                s.prefill_tokens if s else None,
                s.steps if s else None,
                s.preemptions if s else None,
                None if r.engine_cores is None else f"{r.engine_cores:.2f}",
                d.describe() if d else None,
            ]
        )
    headers = [
        "events",
        "competing",
        "pass",
        "time s",
        "req/s",
        "total tok/s",
        "output tok/s",
        "cached prompt tok",
        "prefill tok",
        "steps",
        "preempted",
        "engine cores",
        "dashboard",
    ]
    headers, rows, notes = _measured_columns(headers, rows)
    print(table(headers, rows))
    for note in notes:
        print(note)
    print(_spread_line("enginetui", result.runs))
    if result.events_ratio:
        ratios = ", ".join(f"{m} {v:.3f}x" for m, v in result.events_ratio.items())
        print(f"step events (best pass each, output tok/s relative to events off): {ratios}")
    if result.record_ratio is not None:
        print(
            f"recording (best pass each, output tok/s relative to events on, not recorded): {result.record_ratio:.3f}x"
        )
    if result.recording is not None:
        print(recording_line(result.recording))
    if result.competing_ratio:
        ratios = ", ".join(f"{m} {v:.3f}x" for m, v in result.competing_ratio.items())
        print(f"beside a competing load (best pass each, output tok/s relative to alone): {ratios}")
    if result.hf_runs:
        print("transformers generate, static left-padded batches (useful output tokens only):")
        print(
            table(
                ["batch", "batches", "time s", "req/s", "total tok/s", "output tok/s", "computed out tok"],
                [
                    [
                        h.batch_size,
                        h.num_batches,
                        h.elapsed_s,
                        h.requests_per_s,
                        h.total_tokens_per_s,
                        h.output_tokens_per_s,
                        h.generated_tokens,
                    ]
                    for h in result.hf_runs
                ],
            )
        )
    if result.vllm_runs:
        print(
            f"vLLM {result.vllm_version} LLM.generate, its defaults (cores: default = its own binding, "
            "all = the model on every core):"
        )
        print(
            table(
                ["cores", "competing", "pass", "time s", "req/s", "total tok/s", "output tok/s", "cached prompt tok"],
                [
                    [
                        v.cores,
                        v.competing,
                        v.repeat,
                        v.elapsed_s,
                        v.requests_per_s,
                        v.total_tokens_per_s,
                        v.output_tokens_per_s,
                        v.cached_prompt_tokens,
                    ]
                    for v in result.vllm_runs
                ],
            )
        )
        print(_spread_line("vLLM", result.vllm_runs))
        ratios = ", ".join(f"{label} {v:.2f}x" for label, v in result.vllm_ratio.items())
        print(f"ours / vLLM (best pass each, output tok/s, same competing load): {ratios}")
    if result.vllm_agreement is not None:
        a = result.vllm_agreement
        print(
            f"greedy tokens vs vLLM: {a.identical_requests}/{a.num_requests} requests identical, "
            f"{100 * a.agreeing_token_share:.1f}% of tokens before the first difference"
        )


# The throughput table's columns that only some passes measure: why the others have none. A column no pass
# measured is left out, with its line where the reader would miss it (None: silently).
ONLY_SOME_PASSES = {
    "prefill tok": "prefill tok, steps and preempted are summed from the step events by a live subscriber "
    "(--events subscriber)",
    "steps": None,
    "preempted": None,  # said with prefill tok
    "engine cores": "engine cores: the EngineCore process's CPU time, measured where it runs in its own process",
    "dashboard": None,  # only with --competing dashboard, which names it
}


def _measured_columns(headers: list[str], rows: list[list[Any]]) -> tuple[list[str], list[list[Any]], list[str]]:
    """The throughput table without the columns no pass measured, and the lines that say why a column is
    missing or some of its cells are "-"."""
    keep, notes = [], []
    for i, name in enumerate(headers):
        measured = sum(row[i] is not None for row in rows)
        if name not in ONLY_SOME_PASSES or measured:
            keep.append(i)
        why = ONLY_SOME_PASSES.get(name)
        if why and measured < len(rows):
            notes.append(f"{'-' if measured else 'not shown'}: {why}")
    return [headers[i] for i in keep], [[row[i] for i in keep] for row in rows], notes


def _spread_line(name: str, runs) -> str:
    """Each mode's passes as min-max output tok/s, so the spread shows beside the best."""
    by_label: dict[str, list[float]] = {}
    for r in runs:
        by_label.setdefault(r.label, []).append(r.output_tokens_per_s)
    parts = [f"{label} {min(v):.1f}-{max(v):.1f} ({len(v)})" for label, v in by_label.items()]
    return f"{name} output tok/s, min-max (passes) per mode: " + ", ".join(parts)


def throughput_summary(result) -> str:
    base = result.best[result.reference]
    parts = [
        (
            f"throughput {result.workload.name}: {base.requests_per_s:.2f} req/s, "
            f"{base.total_tokens_per_s:.1f} total tok/s, {base.output_tokens_per_s:.1f} output tok/s"
        )
    ]
    if result.events_ratio:
        parts.append("events " + " ".join(f"{m} {v:.3f}x" for m, v in result.events_ratio.items()))
    if result.record_ratio is not None:
        parts.append(f"recording {result.record_ratio:.3f}x on")
    if result.competing_ratio:
        parts.append("beside " + " ".join(f"{m} {v:.3f}x" for m, v in result.competing_ratio.items()))
    if result.hf_best is not None:
        parts.append(
            f"HF {result.hf_best.output_tokens_per_s:.1f} output tok/s (batch {result.hf_best.batch_size})"
            f" -> {result.hf_ratio:.2f}x HF"
        )
    for label, peer in result.vllm_best.items():
        ratio = result.vllm_ratio.get(label)
        parts.append(
            f"{label} {peer.output_tokens_per_s:.1f} output tok/s" + (f" -> {ratio:.2f}x" if ratio is not None else "")
        )
    return " | ".join(parts)


def recording_line(summary) -> str:
    """What a benchmark's recording holds and where it went (a temporary one is gone by now)."""
    where = f"written to {summary.path}" if os.path.exists(summary.path) else "written to a temporary file, removed"
    return (
        f"recording: {summary.num_events} events, {summary.missed_events} missed, "
        f"{summary.num_bytes / 2**20:.1f} MiB, {where}"
    )


# ---- profile -------------------------------------------------------------------------------


def print_profile(result) -> None:
    print(
        f"decode step profile: {result.model} on {result.device} ({result.dtype}), in-process engine, "
        f"prompts of {result.input_len} tokens, {engine_settings(result.engine_args)}"
    )
    stages = list(result.rows[0].stage_ms) if result.rows else []
    rows = [
        [
            r.batch_size,
            r.steps,
            r.step_ms,
            *(f"{r.stage_ms[s]:.2f} ({r.stage_share[s]:.1f}%)" for s in stages),
            f"{r.overhead_pct:.1f}%",
            r.client_ms,
            r.tokens_per_s,
        ]
        for r in result.rows
    ]
    print(table(["running", "steps", "step ms", *(f"{s} ms" for s in stages), "overhead", "client ms", "tok/s"], rows))


def profile_summary(result) -> str:
    parts = ", ".join(f"{r.overhead_pct:.1f}% at {r.batch_size} ({r.step_ms:.1f} ms/step)" for r in result.rows)
    return f"profile: engine overhead (all but forward + sample) {parts}"


# ---- ops -----------------------------------------------------------------------------------


def print_ops(result) -> None:
    from enginetui.bench.op_kinds import ORDER

    peer = f", against vLLM {result.vllm_version} on the same weights and prompts" if result.vllm_version else ""
    print(
        f"step operators: {result.model} on {result.device} ({result.dtype}), decoding requests of "
        f"{result.input_len} prompt tokens, temperature {result.temperature:g}, {result.steps} steps timed and "
        f"{result.steps} profiled per pass{peer}; ms per step, median of the passes (range); ours with "
        f"{engine_settings(result.engine_args)}"
    )
    for row in result.rows:
        engines = list(row.median_ms)
        print(f"\n{row.shape()} ({sum(p.engine == engines[0] for p in row.passes)} passes each)")
        rows = []
        for kind in (*ORDER, "step"):
            cells = []
            for engine in engines:
                values = [p.ms(kind) for p in row.passes if p.engine == engine]
                cells.append(f"{row.median_ms[engine][kind]:.2f} ({min(values):.2f}-{max(values):.2f})")
            ratio = _ratio(row.median_ms, kind) if len(engines) > 1 else None
            rows.append(
                [kind if kind != "step" else "step, unprofiled", *cells, *([ratio] if len(engines) > 1 else [])]
            )
        headers = ["kind", *(_ENGINE_NAMES[e] for e in engines), *(["ours / vLLM"] if len(engines) > 1 else [])]
        print(table(headers, rows))
        for engine in engines:
            last = [p for p in row.passes if p.engine == engine][-1]
            ops = ", ".join(f"{name} {ms:.2f} ms ({calls}x)" for name, ms, calls in last.top_ops)
            print(f"  {_ENGINE_NAMES[engine]} costliest operators (last pass): {ops}")


_ENGINE_NAMES = {"ours": "ours", "vllm": "vLLM"}  # column headers


def _ratio(median_ms: dict[str, dict[str, float]], kind: str) -> str:
    ours, theirs = median_ms["ours"][kind], median_ms["vllm"][kind]
    return f"{ours / theirs:.2f}x" if theirs > 0.005 else "-"


def ops_summary(result) -> str:
    parts = []
    for row in result.rows:
        m = row.median_ms
        text = f"{m['ours']['step']:.1f} ms at {row.shape()}"
        if "vllm" in m:
            text += f" (vLLM {m['vllm']['step']:.1f}; attention {_ratio(m, 'attention')}, gemm {_ratio(m, 'gemm')})"
        parts.append(text)
    return f"ops: step, decoding requests of {result.input_len} prompt tokens: " + ", ".join(parts)


# ---- latency -------------------------------------------------------------------------------


def print_latency(result) -> None:
    print(workload_line(result) + f", temperature {result.temperature:g}")
    rate = "all at once" if result.request_rate is None else f"Poisson arrivals at {result.request_rate:g} req/s"
    print(f"engines stream through their AsyncLLM, {rate}; ours with {engine_settings(result.engine_args)}")
    for r in result.runs:
        d = r.dashboard
        cost = f"; dashboard {d.describe()}" if d else ""
        version = f" {result.vllm_version}" if r.engine.startswith("vllm") else ""
        print(
            f"{r.label}{version}: duration {r.duration_s:.2f} s, {r.requests_per_s:.2f} req/s, "
            f"{r.output_tokens_per_s:.1f} output tok/s, {r.total_tokens_per_s:.1f} total tok/s{cost}"
        )
        rows = [
            [name, d.mean, d.p50, d.p99, d.count]
            for name, d in (("TTFT", r.ttft_ms), ("TPOT", r.tpot_ms), ("ITL", r.itl_ms), ("E2E", r.e2e_ms))
        ]
        print(table(["ms", "mean", "median", "p99", "samples"], rows))
    if result.recording is not None:
        print(recording_line(result.recording))


def latency_summary(result) -> str:
    rate = "inf" if result.request_rate is None else f"{result.request_rate:g}"
    ours = result.runs[0]
    parts = [
        (
            f"latency {result.workload.name} @ {rate} req/s: TTFT median {ours.ttft_ms.p50:.1f} ms "
            f"(p99 {ours.ttft_ms.p99:.1f}), TPOT median {ours.tpot_ms.p50:.1f} ms, ITL median "
            f"{ours.itl_ms.p50:.1f} ms, E2E median {ours.e2e_ms.p50:.1f} ms | "
            f"{ours.requests_per_s:.2f} req/s, {ours.output_tokens_per_s:.1f} output tok/s"
        )
    ]
    mine = {r.competing: r for r in result.runs if r.engine == "enginetui"}
    for r in result.runs[1:]:
        if r.engine == "enginetui":  # ours beside a load: relative to ours alone
            ratio = f"{r.output_tokens_per_s / ours.output_tokens_per_s:.2f}x alone"
        elif r.competing in mine:  # a peer: ours under the same load relative to it
            ratio = f"ours {mine[r.competing].output_tokens_per_s / r.output_tokens_per_s:.2f}x"
        else:
            ratio = ""
        parts.append(
            f"{r.label}: TTFT median {r.ttft_ms.p50:.1f} ms, TPOT median {r.tpot_ms.p50:.1f} ms, "
            f"{r.output_tokens_per_s:.1f} output tok/s" + (f" ({ratio})" if ratio else "")
        )
    return " | ".join(parts)


# ---- roofline ------------------------------------------------------------------------------


def print_roofline(result) -> None:
    from enginetui.bench.op_kinds import ORDER

    lim = result.limits
    flags = ", ".join(f for f, on in lim.cpu_flags.items() if on) or "none of " + ", ".join(lim.cpu_flags)
    print(
        f"roofline: {result.model} on {result.device} ({result.dtype}), {lim.threads} threads (the engine's), "
        f"{result.steps} steps timed and {result.steps} profiled per pass; ours with "
        f"{engine_settings(result.engine_args)}"
        + (f", against vLLM {result.vllm_version} on the same weights and prompts" if result.vllm_version else "")
    )
    print(
        f"limits: memory bandwidth {lim.bandwidth_gb_s:.1f} GB/s (triad on 3 x {lim.array_mib:.0f} MiB float32, best "
        f"of {len(lim.bandwidth_runs_gb_s)}); GEMM peak {lim.gemm_gflop_s:.1f} GFLOP/s ({lim.gemm_size}^3 "
        f"{lim.gemm_dtype} through {lim.gemm_path}, best of {len(lim.gemm_runs_gflop_s)})"
        + (f"; CPU offers {flags}" if lim.cpu_flags else "")
    )
    rows = []
    for row in result.rows:
        for engine, ms in row.ops.median_ms.items():
            rows.append(
                [
                    row.kind,
                    _ENGINE_NAMES[engine],
                    row.cost.bytes / 1e6,
                    row.cost.flops / 1e9,
                    f"{row.floor_ms:.3f} ({row.bound})",
                    ms["step"],
                    f"{100 * row.fraction[engine]:.1f}%",
                    *(ms[kind] for kind in ORDER),
                ]
            )
    headers = ["step", "engine", "MB moved", "GFLOP", "floor ms", "step ms", "of roofline", *(f"{k} ms" for k in ORDER)]
    print(table(headers, rows))
    for note in result.notes:
        print(f"  {note}")


def roofline_summary(result) -> str:
    lim = result.limits
    parts = []
    for row in result.rows:
        ours = f"{row.kind}: {100 * row.fraction['ours']:.0f}%"
        if "vllm" in row.fraction:
            ours += f" (vLLM {100 * row.fraction['vllm']:.0f}%)"
        parts.append(ours)
    return f"roofline ({lim.bandwidth_gb_s:.1f} GB/s, {lim.gemm_gflop_s:.1f} GFLOP/s {lim.gemm_dtype}): " + ", ".join(
        parts
    )
