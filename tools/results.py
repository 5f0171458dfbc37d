"""The results tables and plot, made from the run records in results/ (one JSON file per run, as
`enginetui bench ... --save-result` writes them; enginetui/bench/saved_result.py says what they hold).

    python tools/results.py          # rewrite the tables in README.md and docs/results.md, and the plot
    python tools/results.py --check  # exit 1 if a committed table is not what results/ gives

Each table sits between `<!-- results:begin NAME -->` and `<!-- results:end NAME -->` in its page;
the prose around it is written by hand. The README's table and "Every CPU at a glance" give each CPU's
latest figure per workload; the first table on the results page gives the runs with a `headline` (a
benchmark's result in words), the "whole set" table one CPU's `tools/cpu_results.sh` run; the others list
every run, the history of a figure.
"""

import argparse
import json
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results"
README = ROOT / "README.md"
RESULTS_PAGE = ROOT / "docs" / "results.md"
SPEED_PAGE = ROOT / "docs" / "speed.md"
PLOT = ROOT / "docs" / "results-vs-vllm.png"

Record = dict[str, Any]
NONE = "–"  # a cell with no figure
SERVER_RATES = [0.5, 1.0, 2.0]  # the request rates the summary's server column names in its header
WORKLOAD_NAMES = {"sharegpt": "ShareGPT"}  # how a workload preset is written in the tables (else its name)
DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
# the summary tables' throughput columns: (header, workload, dtype)
THROUGHPUT_COLUMNS = (
    ("mixed, fp32", "mixed", "float32"),
    ("64 ShareGPT conversations, fp32", "sharegpt", "float32"),
    ("mixed, bf16", "mixed", "bfloat16"),
    ("ShareGPT, bf16", "sharegpt", "bfloat16"),
)
SERVER_COLUMN = "server against vLLM's server, ShareGPT at 0.5 / 1 / 2 req/s"


def load(folder: Path = RESULTS) -> list[Record]:
    """Every record in `folder`, oldest first (by date, start time, then file name); each knows its file."""
    records = []
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text())
            if not (data["provenance"]["machine"]["label"] and data["provenance"]["date"] and data["figures"]["kind"]):
                raise ValueError("an empty CPU label, date or kind")
        except (ValueError, KeyError, TypeError) as exc:
            raise SystemExit(f"tools/results.py: {path}: not a run record ({exc.__class__.__name__}: {exc})") from None
        data["file"] = path.name
        records.append(data)
    return sorted(records, key=lambda r: (r["provenance"]["date"], _start(r), r["file"].removesuffix(".json")))


def _start(record: Record) -> str:
    return (record["provenance"].get("time_utc") or "").split("-")[0]


def _label(record: Record) -> str:
    return record["provenance"]["machine"]["label"]


def _cpus(records: list[Record]) -> list[str]:
    """The CPUs, the one measured last first."""
    latest: dict[str, tuple[str, str]] = {}
    for r in records:
        latest[_label(r)] = max(latest.get(_label(r), ("", "")), (r["provenance"]["date"], _start(r)))
    return sorted(latest, key=lambda cpu: (latest[cpu], cpu), reverse=True)


def _ratio(value: float | None, digits: int = 2, bold: bool = False) -> str:
    if value is None:
        return NONE
    text = f"{value:.{digits}f}x"
    return f"**{text}**" if bold and round(value, digits) >= 1 else text


def _span(values: list[float] | None, digits: int = 1) -> str:
    if not values:
        return NONE
    low, high = (f"{v:.{digits}f}" for v in values)
    return low if low == high else f"{low}-{high}"


def _rate(value: float) -> str:
    return f"{value:g}"


def _when(record: Record) -> str:
    run = record["provenance"]
    return f"{run['date']} {run['time_utc']} UTC" if run.get("time_utc") else run["date"]


def _passes(n: int) -> str:
    return "1 pass" if n == 1 else f"{n} passes"


def _dates(records: Iterable[Record]) -> str:
    dates = sorted({r["provenance"]["date"] for r in records})
    return dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}" if dates else NONE


def markdown(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---" for _ in headers) + " |"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


# ---- the latest figure per CPU and workload -----------------------------------------------------------


def _of(
    records: list[Record],
    cpu: str,
    kind: str,
    cpu_isa: str | None = None,
    keep: Callable[[Record], bool] = lambda r: True,
) -> list[Record]:
    return [
        r
        for r in records
        if _label(r) == cpu
        and r["figures"]["kind"] == kind
        and r["provenance"].get("cpu_isa") == cpu_isa
        and not r["figures"].get("variant")
        and keep(r)
    ]


def _against_vllm_alone(record: Record) -> dict[str, Any] | None:
    """The row of a throughput record against vLLM on every core, no load beside."""
    return next(
        (row for row in record["figures"]["rows"] if row.get("load") == "none" and row.get("vllm_cores") == "all"), None
    )


def latest_throughput(
    records: list[Record], cpu: str, workload: str, dtype: str, cpu_isa: str | None = None
) -> tuple[float, Record] | None:
    """Ours / vLLM (on every core, alone) of the CPU's latest run of this workload and dtype."""
    runs = _of(
        records,
        cpu,
        "throughput",
        cpu_isa,
        lambda r: (
            r["figures"]["workload"] == workload
            and r["figures"]["dtype"] == dtype
            and _against_vllm_alone(r) is not None
        ),
    )
    row = _against_vllm_alone(runs[-1]) if runs else None
    return (row["ours_vs_vllm"], runs[-1]) if row else None


def latest_server(records: list[Record], cpu: str, cpu_isa: str | None = None) -> tuple[str, list[Record]] | None:
    """Ours / vLLM's server in output tok/s on ShareGPT at each rate, each rate's latest figure."""
    at: dict[float, list[tuple[float, Record]]] = {}  # rate -> its figures of the latest day it was measured
    for r in _of(records, cpu, "serve-vs-vllm-server", cpu_isa, lambda r: r["figures"]["workload"] == "sharegpt"):
        for rate, value in zip(r["figures"]["rates"], r["figures"]["output_tok_s_ratio"]):
            if rate in r["figures"].get("disturbed_rates", ()):  # passes the record's note says were disturbed
                continue
            same_day = [f for f in at.get(rate, []) if f[1]["provenance"]["date"] == r["provenance"]["date"]]
            at[rate] = [*same_day, (value, r)]
    if not at:
        return None
    rates = sorted(at)
    cells = []
    for rate in rates:
        low, high = (_ratio(v) for v in (min(f[0] for f in at[rate]), max(f[0] for f in at[rate])))
        cells.append(low if low == high else f"{low.removesuffix('x')}-{high}")
    text = " / ".join(cells)
    if rates != SERVER_RATES:
        text += f" at {' / '.join(map(_rate, rates))} req/s"
    return text, [r for figures in at.values() for _, r in figures]


def latest_cost(records: list[Record], cpu: str) -> tuple[str, list[Record]] | None:
    """The server's own cost, ours (and vLLM's), each side's latest figure."""
    runs = _of(records, cpu, "serve-overhead")
    ours = [r for r in runs if r["figures"].get("ours_server_vs_generate") is not None]
    theirs = [r for r in runs if r["figures"].get("vllm_server_vs_generate") is not None]
    if not ours:
        return None
    text = _ratio(ours[-1]["figures"]["ours_server_vs_generate"], 3, bold=True)
    if theirs:
        text += f" (vLLM's own: {_ratio(theirs[-1]['figures']['vllm_server_vs_generate'], 3)})"
    return text, [ours[-1], *theirs[-1:]]


def summary_row(
    records: list[Record], cpu: str, cpu_isa: str | None, bold: bool, cost: bool
) -> tuple[list[str], list[Record]] | None:
    cells, used = [], []
    for _, workload, dtype in THROUGHPUT_COLUMNS:
        found = latest_throughput(records, cpu, workload, dtype, cpu_isa)
        cells.append(_ratio(found[0], bold=bold) if found else NONE)
        used += [found[1]] if found else []
    server = latest_server(records, cpu, cpu_isa)
    cells.append(server[0] if server else NONE)
    used += server[1] if server else []
    if cost:
        own = latest_cost(records, cpu) if cpu_isa is None else None
        cells.append(own[0] if own else NONE)
        used += own[1] if own else []
    return (cells, used) if used else None


def readme_table(records: list[Record]) -> str:
    """Ours / vLLM per CPU and workload, each CPU's latest runs."""
    rows = []
    for cpu in _cpus(records):
        found = summary_row(records, cpu, None, bold=False, cost=False)
        if found:
            rows.append([cpu + _hint(found[1][-1]), *found[0], _dates(found[1])])
    return markdown(["CPU", *(c[0] for c in THROUGHPUT_COLUMNS), SERVER_COLUMN, "measured"], rows)


def _hint(record: Record) -> str:
    """What sets a CPU apart in the README's table: no AVX-512, or AMX."""
    flags = record["provenance"]["machine"].get("flags") or {}
    return " (AVX2 only)" if flags.get("avx512f") is False else " (AMX)" if flags.get("amx") else ""


def _instruction_sets(record: Record) -> str:
    m = record["provenance"]["machine"]
    flags = m.get("flags") or {}
    where = " ".join(f"{name} {m[name]}" for name in ("family", "model") if m.get(name) is not None)
    sets = [
        "AVX-512" if flags.get("avx512f") else "AVX2 only" if flags.get("avx2") else None,
        "AVX512-BF16" if flags.get("avx512_bf16") else None,
        "AMX" if flags.get("amx") else "no AMX" if flags.get("amx") is False and flags.get("avx512f") else None,
    ]
    isa = ", ".join(s for s in sets if s)
    where = "" if where in m["label"] else where  # a label that names the family and model already
    return ", ".join(p for p in (m["label"], where) if p) + (f" ({isa})" if isa else "")


def glance_table(records: list[Record]) -> str:
    """Every CPU at a glance: the README's table with the instruction sets, the AVX2 runs and the server's cost."""
    rows = []
    for cpu in _cpus(records):
        for cpu_isa in (
            None,
            *sorted(
                {r["provenance"]["cpu_isa"] for r in records if _label(r) == cpu and r["provenance"].get("cpu_isa")}
            ),
        ):
            found = summary_row(records, cpu, cpu_isa, bold=True, cost=True)
            if found:
                name = (
                    _instruction_sets(found[1][-1])
                    if cpu_isa is None
                    else f"{cpu} on its {cpu_isa.upper()} code (`--cpu-isa {cpu_isa}`)"
                )
                rows.append([name, *found[0], _dates(found[1])])
    return markdown(
        [
            "CPU (instruction sets)",
            *(c[0] for c in THROUGHPUT_COLUMNS),
            SERVER_COLUMN,
            "the server's own cost (our server / our `LLM.generate`)",
            "measured",
        ],
        rows,
    )


# ---- every run ----------------------------------------------------------------------------------------


def _runs(records: list[Record], kind: str, order: Callable[[Record], Any]) -> list[Record]:
    cpus = _cpus(records)
    runs = [r for r in records if r["figures"]["kind"] == kind]
    return sorted(
        runs,
        key=lambda r: (
            cpus.index(_label(r)),
            order(r),
            r["provenance"]["date"],
            _start(r),
            r["file"].removesuffix(".json"),
        ),
    )


def _workload(fig: dict[str, Any]) -> str:
    name = WORKLOAD_NAMES.get(fig.get("workload") or "", fig.get("workload") or NONE)
    return f"{name}, {DTYPES.get(fig['dtype'], fig['dtype'])}"


def throughput_table(records: list[Record]) -> str:
    """Every offline throughput run against vLLM on every core: output tok/s over the passes."""
    loads = ["none", "busy", "dashboard"]

    def order(r: Record) -> tuple:
        f = r["figures"]
        return (
            r["provenance"].get("cpu_isa") or "",
            f["dtype"] != "float32",
            f["workload"] != "mixed",
            f["workload"],
            min((loads.index(row["load"]) if row["load"] in loads else 9 for row in f["rows"]), default=9),
        )

    rows = []
    for r in _runs(records, "throughput", order):
        f, isa = r["figures"], r["provenance"].get("cpu_isa")
        for row in f["rows"]:
            if row.get("vllm_cores") != "all":
                continue
            workload = _workload(f) + (", beside one busy process" if row["load"] == "busy" else "")
            workload += f", both on their {isa.upper()} code" if isa else ""
            ours, vllm = _span(row["ours_output_tok_s"]), _span(row.get("vllm_output_tok_s"))
            if row.get("ours_vs_alone") is not None:
                ours += f" = {row['ours_vs_alone']:.2f}x of alone"
            if row.get("ours_engine_cores"):
                ours += f"; engine cores {_span(row['ours_engine_cores'], 2)}"
            if row.get("vllm_vs_alone") is not None:
                vllm += f" = {row['vllm_vs_alone']:.2f}x of alone"
            when = _when(r) + (f", {_passes(f['passes'])}" if f.get("passes") else "")
            rows.append(
                [
                    _label(r),
                    workload,
                    ours,
                    vllm,
                    _ratio(row["ours_vs_vllm"], bold=True),
                    when,
                    f.get("note") or "",
                    f"`{r['file']}`",
                ]
            )
    return markdown(
        ["CPU", "workload", "enginetui", "vLLM, both cores", "ours / vLLM", "measured", "notes", "record (results/)"],
        rows,
    )


def servers_table(records: list[Record]) -> str:
    """Every run of our server against vLLM's: ours / vLLM's at each rate, medians of the passes."""
    rows = []
    for r in _runs(
        records,
        "serve-vs-vllm-server",
        lambda r: (r["provenance"].get("cpu_isa") or "", r["figures"]["workload"] != "sharegpt"),
    ):
        f, isa = r["figures"], r["provenance"].get("cpu_isa")
        cpu = _label(r) + (f", both on their {isa.upper()} code" if isa else "")
        workload = f"{_workload(f)}, {f['num_prompts']} requests" if f.get("num_prompts") else _workload(f)
        when = _when(r) + (f", {_passes(f['passes'])} each" if f.get("passes") else "")
        rows.append(
            [
                cpu,
                workload,
                " / ".join(map(_rate, f["rates"])),
                *(
                    " / ".join(_ratio(v) for v in f[key])
                    for key in ("output_tok_s_ratio", "ttft_p50_ratio", "tpot_p50_ratio")
                ),
                _ratio(f.get("step_time_ratio")),
                when,
                f.get("note") or "",
                f"`{r['file']}`",
            ]
        )
    return markdown(
        [
            "CPU",
            "workload",
            "rates (req/s)",
            "output tok/s",
            "TTFT p50",
            "TPOT p50",
            "model time per step (`--step-times`)",
            "measured",
            "notes",
            "record (results/)",
        ],
        rows,
    )


def cost_table(records: list[Record]) -> str:
    """Every run of the server's own cost: output tok/s through the server / through LLM.generate, best passes."""
    rows = []
    for r in _runs(records, "serve-overhead", lambda r: r["figures"].get("variant") or ""):
        f = r["figures"]
        cpu = _label(r) + (f", `{f['variant']}`" if f.get("variant") else "")
        both = (
            f"{_ratio(f.get('servers_ours_vs_vllm'), 3)}, {_ratio(f.get('generate_ours_vs_vllm'), 3)}"
            if f.get("servers_ours_vs_vllm") is not None
            else NONE
        )
        when = _when(r) + (f", {_passes(f['passes'])} each" if f.get("passes") else "")
        rows.append(
            [
                cpu,
                _ratio(f.get("ours_server_vs_generate"), 3, bold=True),
                _ratio(f.get("vllm_server_vs_generate"), 3),
                both,
                when,
                f.get("note") or "",
                f"`{r['file']}`",
            ]
        )
    return markdown(
        [
            "CPU",
            "ours: server / `LLM.generate`",
            "vLLM's: server / `LLM.generate`",
            "ours / vLLM's: servers, `LLM.generate`",
            "measured",
            "notes",
            "record (results/)",
        ],
        rows,
    )


def _ms(value: float) -> str:
    """Milliseconds as a record gives them (a live run's to 0.1 ms, or 0.01 under 10)."""
    text = f"{value:,}"
    if len(text.partition(".")[2]) > 2:
        text = f"{value:,.1f}" if value >= 10 else f"{value:,.2f}"
    return text


def _shape(shape: dict[str, Any], input_len: int) -> str:
    """A measured step in words, as `bench ops` names it."""
    batch, prompt = shape["batch_size"], shape["prompt_len"]
    decoding = f"{batch} decoding request{'s' if batch != 1 else ''}"
    if not prompt:
        return f"{decoding} at {input_len:,} tokens"
    return f"{decoding} and a {prompt:,}-token prompt" if batch else f"a {prompt:,}-token prompt alone"


def _ms_cell(shape: dict[str, Any], kind: str) -> str:
    ms, ratio = shape["ms"].get(kind), shape["ratio"].get(kind)
    parts = [" / ".join(map(_ms, ms))] if ms and len(ms) == 2 else []
    parts += [f"({_ratio(ratio)})" if parts else _ratio(ratio)] if ratio is not None else []
    return " ".join(parts) or NONE


def ops_table(keep: Callable[[Record, dict[str, Any]], bool]) -> Callable[[list[Record]], str]:
    """Every `bench ops` run's step shapes that `keep` takes: ms per step ours / vLLM's (medians of the passes)."""

    def table(records: list[Record]) -> str:
        rows = []
        for r in _runs(records, "ops", lambda r: r["provenance"].get("cpu_isa") or ""):
            f, isa = r["figures"], r["provenance"].get("cpu_isa")
            for shape in f["shapes"]:
                if not keep(r, shape):
                    continue
                cpu = _label(r) + (f", both on their {isa.upper()} code" if isa else "")
                when = _when(r) + (f", {_passes(f['passes'])} each" if f.get("passes") else "")
                notes = "; ".join(n for n in (shape.get("note"), f.get("note")) if n)
                cells = [_ms_cell(shape, kind) for kind in ("step", "attention", "gemm")]
                rows.append([cpu, _shape(shape, f["input_len"]), *cells, when, notes, f"`{r['file']}`"])
        headers = ["CPU", "step", "step, unprofiled", "attention", "GEMMs", "measured", "notes", "record (results/)"]
        return markdown(headers, rows)

    return table


BENCHMARKS = ("throughput", "latency", "serve", "profile", "ops", "scheduling")  # the headlines' order


def headlines_table(records: list[Record]) -> str:
    """A line per benchmark: the runs with a `headline` (what the benchmark measures, the result in words), by
    benchmark, the latest first."""
    runs = [r for r in records if r["figures"].get("headline")]
    runs.sort(key=lambda r: (r["provenance"]["date"], _start(r), r["file"]), reverse=True)
    runs.sort(key=lambda r: (BENCHMARKS + (r["provenance"]["benchmark"],)).index(r["provenance"]["benchmark"]))
    rows = [
        [r["figures"]["headline"]["benchmark"], f"`{r['provenance']['command']}`", r["figures"]["headline"]["result"]]
        for r in runs
    ]
    return markdown(["benchmark", "command", "result"], rows)


def whole_set_table(cpu: str, date: str) -> Callable[[list[Record]], str]:
    """One CPU's `tools/cpu_results.sh` set of a day, the mixed workload: output tok/s of the best pass (the range),
    ours under each load, vLLM on its default cores and on every core, and `transformers.generate`."""
    columns = (
        ("headless, fp32", "float32", "none"),
        ("dashboard attached, fp32", "float32", "dashboard"),
        ("one busy process, fp32", "float32", "busy"),
        ("headless, bf16", "bfloat16", "none"),
    )

    def best(values: list[float]) -> str:
        return f"**{values[-1]:.1f}** ({_span(values)})"

    def table(records: list[Record]) -> str:
        runs = _of(records, cpu, "throughput", keep=lambda r: r["provenance"]["date"] == date)
        mixed = [r for r in runs if r["figures"]["workload"] == "mixed" and r["figures"].get("ours_vs_hf") is None]
        hf = [r for r in runs if r["figures"]["workload"] == "mixed" and r["figures"].get("ours_vs_hf") is not None]

        def find(dtype: str, load: str, cores: str | None) -> dict[str, Any] | None:
            found = [
                row
                for r in mixed
                if r["figures"]["dtype"] == dtype
                for row in r["figures"]["rows"]
                if row["load"] == load and (cores is None or row.get("vllm_cores") == cores)
            ]
            return found[-1] if found else None

        ours = []
        for _, dtype, load in columns:
            found = find(dtype, load, None)
            cell = best(found["ours_output_tok_s"]) if found else NONE
            if found and found.get("ours_vs_alone") is not None:
                cell += f" = **{found['ours_vs_alone']:.2f}x** headless"
            if found and found.get("dashboard_core_percent"):
                cell += (
                    f"; the dashboard took {_span(found['dashboard_core_percent'], 0)}% of a core, "
                    f"{_span(found['redraws_per_s'])} redraws/s"
                )
            if found and found.get("ours_engine_cores"):
                cell += f" (engine cores {_span(found['ours_engine_cores'], 2)})"
            ours.append(cell)
        rows = [["enginetui", *ours]]
        version = next((r["figures"].get("vllm_version") for r in mixed if r["figures"].get("vllm_version")), "")
        for cores, name in (("default", "its defaults (model on one core)"), ("all", "both cores")):
            cells = []
            for _, dtype, load in columns:
                found = find(dtype, load, cores)
                ratio = _ratio(found["ours_vs_vllm"]) if found else ""
                cells.append(  # every ratio bold but beside the busy process, as the page had it
                    f"{best(found['vllm_output_tok_s'])} → ours {ratio if load == 'busy' else f'**{ratio}**'}"
                    if found
                    else NONE
                )
            rows.append([f"vLLM {version}, {name}", *cells])
        if hf:
            f = hf[-1]["figures"]
            cell = (
                f"**{f['hf_output_tok_s']:.1f}** → ours **{_ratio(f['ours_vs_hf'])}** "
                f"(ours {f['rows'][0]['ours_output_tok_s'][-1]:.1f} in that run)"
            )
            rows.append(
                [f"`transformers.generate`, batches of {f['hf_batch_size']}", cell, *[NONE] * (len(columns) - 1)]
            )
        return markdown(["engine", *(c[0] for c in columns)], rows)

    return table


# ---- how close to the machine's limit (`enginetui bench roofline`) ------------------------------------

README_ROOFLINE_STEPS = ("decode 1 @ 128", "decode 8 @ 128", "decode 64 @ 128", "prefill 512")


def _reached(step: dict[str, Any]) -> str:
    """'36% (vLLM 36%)': the fraction of the roofline each engine's step reached."""
    ours, *vllm = step["fraction"]
    return f"{ours:.0%}" + (f" (vLLM {vllm[0]:.0%})" if vllm else "")


def _limits(fig: dict[str, Any]) -> str:
    return f"{fig['bandwidth_gb_s']:.1f} GB/s, {fig['gemm_gflop_s']:.0f} GFLOP/s"


def readme_roofline_table(records: list[Record]) -> str:
    """Per CPU and dtype, each step kind from the latest roofline run that measured it (a run may time only
    some kinds): the share of the machine's limit it reached, and the limits of the runs the row draws on."""
    latest: dict[tuple[str, str], dict[str, tuple[dict[str, Any], dict[str, Any]]]] = {}
    for r in records:
        fig = r["figures"]
        if fig["kind"] == "roofline" and not r["provenance"].get("cpu_isa"):
            row = latest.setdefault((_label(r), fig["dtype"]), {})
            row.update({step["kind"]: (step, fig) for step in fig["steps"] if step["kind"] in README_ROOFLINE_STEPS})
    rows = []
    for (cpu, dtype), steps in sorted(latest.items(), key=lambda kv: (kv[0][0], kv[0][1] != "float32")):
        cells = [_reached(steps[k][0]) if k in steps else NONE for k in README_ROOFLINE_STEPS]
        runs = list({id(fig): fig for _, fig in steps.values()}.values())
        rows.append([cpu, DTYPES.get(dtype, dtype), _limit_range(runs), *cells])
    return markdown(["CPU", "dtype", "limits (2 cores)", *README_ROOFLINE_STEPS], rows)


def _limit_range(runs: list[dict[str, Any]]) -> str:
    """'35.0-36.7 GB/s, 222-224 GFLOP/s': the limits measured in the runs a row draws on."""
    gb = [f"{v:.1f}" for v in sorted(fig["bandwidth_gb_s"] for fig in runs)]
    gf = [f"{v:.0f}" for v in sorted(fig["gemm_gflop_s"] for fig in runs)]
    span = lambda v: v[0] if v[0] == v[-1] else f"{v[0]}-{v[-1]}"  # noqa: E731
    return f"{span(gb)} GB/s, {span(gf)} GFLOP/s"


def roofline_table(records: list[Record]) -> str:
    """Every roofline run, newest first: each step kind's floor, each engine's step and share of the floor."""
    rows = []
    for r in reversed([r for r in records if r["figures"]["kind"] == "roofline"]):
        fig = r["figures"]
        run = f"{_label(r)}, {DTYPES.get(fig['dtype'], fig['dtype'])}, {_when(r)} ({_limits(fig)})"
        for step in fig["steps"]:
            ms = " / ".join(f"{v:.1f}" for v in step["ms"])
            rows.append([run, step["kind"], f"{step['floor_ms']:.1f} ({step['bound']})", ms, _reached(step)])
            run = ""
    return markdown(["run", "step", "floor ms (limit)", "step ms: ours / vLLM", "of the roofline"], rows)


TABLES: dict[Path, dict[str, Callable[[list[Record]], str]]] = {
    README: {"summary": readme_table, "roofline": readme_roofline_table},
    SPEED_PAGE: {"roofline": roofline_table},
    RESULTS_PAGE: {
        "headlines": headlines_table,
        "glance": glance_table,
        "throughput": throughput_table,
        "servers": servers_table,
        "server-cost": cost_table,
        "ops-decode": ops_table(lambda r, shape: not r["provenance"].get("cpu_isa") and not shape["prompt_len"]),
        "ops-prompt": ops_table(lambda r, shape: not r["provenance"].get("cpu_isa") and bool(shape["prompt_len"])),
        "ops-avx2": ops_table(lambda r, shape: r["provenance"].get("cpu_isa") == "avx2"),
        "whole-set": whole_set_table("Intel Xeon, Sapphire Rapids", "2026-12-01"),
    },
}


def fill(text: str, name: str, table: str, page: str) -> str:
    """`text` with the table between its markers replaced by `table`."""
    begin, end = f"<!-- results:begin {name} -->", f"<!-- results:end {name} -->"
    pattern = re.compile(re.escape(begin) + r"\n.*?" + re.escape(end), flags=re.S)
    if len(pattern.findall(text)) != 1:
        raise SystemExit(f"tools/results.py: {page} needs one '{begin}' ... '{end}' pair around its table")
    return pattern.sub(lambda _: f"{begin}\n{table}\n{end}", text)


def pages(records: list[Record], texts: dict[Path, str]) -> dict[Path, str]:
    """Each page's text with its tables made from `records`."""
    out = {}
    for page, tables in TABLES.items():
        text = texts[page]
        for name, make in tables.items():
            text = fill(text, name, make(records), page.name)
        out[page] = text
    return out


# ---- the plot -----------------------------------------------------------------------------------------


def plot(records: list[Record], path: Path) -> None:
    """Ours / vLLM's output tok/s per CPU, a bar per workload (each CPU's latest run), into a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    cpus = [cpu for cpu in _cpus(records) if summary_row(records, cpu, None, bold=False, cost=False)]
    columns: list[tuple[str, str | None, str | None]] = [
        *THROUGHPUT_COLUMNS,
        ("through the servers, ShareGPT at 1 req/s", None, None),
    ]
    width = 0.8 / len(columns)
    fig, ax = plt.subplots(figsize=(8, 0.9 * len(cpus) + 2.2))
    y = np.arange(len(cpus))
    for i, (header, workload, dtype) in enumerate(columns):
        values = []
        for cpu in cpus:
            if workload is None or dtype is None:
                runs = _of(
                    records,
                    cpu,
                    "serve-vs-vllm-server",
                    keep=lambda r: r["figures"]["workload"] == "sharegpt" and 1.0 in r["figures"]["rates"],
                )
                values.append(
                    runs[-1]["figures"]["output_tok_s_ratio"][runs[-1]["figures"]["rates"].index(1.0)]
                    if runs
                    else np.nan
                )
            else:
                found = latest_throughput(records, cpu, workload, dtype)
                values.append(found[0] if found else np.nan)
        ax.barh(y + (i - (len(columns) - 1) / 2) * width, values, height=width, label=header)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(y, cpus)
    ax.invert_yaxis()
    ax.set_xlim(0.6, None)
    ax.set_xlabel("ours / vLLM's output tokens/s, best pass against best pass (over 1: ours faster)")
    ax.set_title("enginetui against vLLM on the same CPU: each CPU's latest run", fontsize=10)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Make the results tables and plot from results/*.json.")
    parser.add_argument(
        "--check",
        action="store_true",
        help="change nothing; exit 1 if a committed table differs from what results/ gives",
    )
    args = parser.parse_args(argv)
    records = load()
    texts = {page: page.read_text() for page in TABLES}
    made = pages(records, texts)
    stale = [page for page in TABLES if made[page] != texts[page]]
    if args.check:
        for page in stale:
            print(f"{page.relative_to(ROOT)}: its results tables differ from results/: run python tools/results.py")
        return 1 if stale else 0
    for page in stale:
        page.write_text(made[page])
    plot(records, PLOT)
    print(f"{len(records)} records -> {', '.join(str(p.relative_to(ROOT)) for p in TABLES)}, {PLOT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
