"""The record of one benchmark run, as `--json PATH` and `--save-result` write it: the benchmark's
result (every pass) with `provenance` (the machine, the command, the commit, the date) and `figures` (the
comparisons the results tables read: ours / vLLM's, per workload). The repository's `results/` holds
one record per run; `python tools/results.py` makes the README's and docs/results.md's tables from them.
"""

import datetime
import os
import re
import shlex
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

import msgspec

from enginetui.kernels import cpu_isa

RESULT_DIR = "results"  # where --save-result writes unless --result-dir says otherwise
FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx")  # the instruction sets the kernels and vLLM choose code by

# (vendor, family, lowest model, highest model) -> microarchitecture: what the results tables name a CPU by
MICROARCHITECTURES = (
    ("AuthenticAMD", 23, 0x00, 0x2F, "Zen"),
    ("AuthenticAMD", 23, 0x30, 0x7F, "Zen 2"),
    ("AuthenticAMD", 25, 0x00, 0x0F, "Zen 3"),
    ("AuthenticAMD", 25, 0x10, 0x1F, "Zen 4"),
    ("AuthenticAMD", 25, 0x20, 0x5F, "Zen 3"),
    ("AuthenticAMD", 25, 0x60, 0xAF, "Zen 4"),
    ("AuthenticAMD", 26, 0x00, 0xFF, "Zen 5"),
    ("GenuineIntel", 6, 0x55, 0x55, "Skylake / Cascade Lake"),
    ("GenuineIntel", 6, 0x6A, 0x6A, "Ice Lake"),
    ("GenuineIntel", 6, 0x8F, 0x8F, "Sapphire Rapids"),
    ("GenuineIntel", 6, 0xAD, 0xAD, "Granite Rapids"),
    ("GenuineIntel", 6, 0xCF, 0xCF, "Emerald Rapids"),
)
LINES = ("AMD EPYC", "AMD Ryzen", "Intel Xeon", "Intel Core")  # product lines found in a CPU's model name


def machine(cpuinfo: str | None = None) -> dict[str, Any]:
    """This CPU: model name, vendor, family / model, the flags that matter, the cores this process may use,
    and `label`, the name the results tables use (e.g. "AMD EPYC Zen 4")."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    first: dict[str, str] = {}
    for line in cpuinfo.split("\n\n", 1)[0].splitlines():  # the first processor's block
        key, _, value = line.partition(":")
        first.setdefault(key.strip(), value.strip())
    flags = set(first.get("flags", "").split())
    facts: dict[str, Any] = {
        "model_name": first.get("model name"),
        "vendor": first.get("vendor_id"),
        "family": int(first["cpu family"]) if first.get("cpu family", "").isdigit() else None,
        "model": int(first["model"]) if first.get("model", "").isdigit() else None,
        "flags": {flag: (flag in flags if flag != "amx" else "amx_tile" in flags) for flag in FLAGS},
        "cores": len(os.sched_getaffinity(0)),
    }
    facts["label"] = cpu_label(facts)
    return facts


def cpu_label(facts: dict[str, Any]) -> str:
    """The product line and the microarchitecture, e.g. "AMD EPYC Zen 4", "Intel Xeon, Sapphire Rapids"; the line
    with the family and model where they are not in MICROARCHITECTURES ("Intel Xeon, family 6 model 167": a
    hypervisor may name the CPU only "Intel(R) Xeon(R) Processor"); the model name where the line is unknown."""
    name = facts.get("model_name") or "unknown CPU"
    arch = next(
        (
            a
            for vendor, family, low, high, a in MICROARCHITECTURES
            if facts.get("vendor") == vendor
            and facts.get("family") == family
            and low <= (facts.get("model") or 0) <= high
        ),
        None,
    )
    line = next((p for p in LINES if all(w in name for w in p.split())), None)
    if line is None:
        return name
    if arch is not None:
        return f"{line} {arch}" if line.startswith("AMD") else f"{line}, {arch}"  # "AMD EPYC Zen 4"
    if facts.get("family") is None or facts.get("model") is None:
        return name
    return f"{line}, family {facts['family']} model {facts['model']}"


def source() -> dict[str, Any]:
    """The code that ran: the git commit when the package runs from a checkout (with `dirty`: uncommitted
    changes), and the package version."""
    try:
        version = metadata.version("enginetui")
    except metadata.PackageNotFoundError:
        version = None
    facts: dict[str, Any] = {"commit": None, "dirty": None, "version": version}
    checkout = Path(__file__).resolve().parents[2]  # the repository, when the package runs from a checkout
    if (checkout / ".git").exists():
        try:
            git = ["git", "-C", str(checkout)]
            facts["commit"] = subprocess.run(
                [*git, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
            ).stdout.strip()
            status = subprocess.run(
                [*git, "status", "--porcelain", "--untracked-files=no"],
                capture_output=True,
                text=True,
                timeout=10,
                check=True,
            ).stdout
            facts["dirty"] = bool(status.strip())
        except (OSError, subprocess.SubprocessError):
            pass
    return facts


def run_facts(
    benchmark: str, argv: list[str] | None, started: datetime.datetime, finished: datetime.datetime
) -> dict[str, Any]:
    """Where, when and how a run was made (the record's `provenance`)."""
    return {
        "benchmark": benchmark,
        "command": "enginetui " + shlex.join(argv) if argv is not None else None,
        **source(),
        "date": started.strftime("%Y-%m-%d"),
        "time_utc": f"{started:%H:%M}-{finished:%H:%M}",
        "cpu_isa": cpu_isa.emulated(),  # run as if on a CPU with only this instruction set (--cpu-isa)
        "machine": machine(),
        "source": "measured",
    }


def record(result: Any, benchmark: str, argv: list[str] | None, started: datetime.datetime) -> dict[str, Any]:
    """The benchmark's result as JSON with its `provenance` and `figures`."""
    data = msgspec.to_builtins(result)
    data["provenance"] = run_facts(benchmark, argv, started, datetime.datetime.now(datetime.UTC))
    data["figures"] = figures(result)
    return data


def file_name(data: dict[str, Any]) -> str:
    """date-time-cpu-workload.json, e.g. 2026-12-06-1120-amd-epyc-zen-4-throughput-mixed-fp32.json."""
    run, fig = data["provenance"], data["figures"]
    loads = dict.fromkeys(r["load"] for r in fig.get("rows") or [] if r.get("load") not in (None, "none"))
    parts = [
        run["date"],
        (run.get("time_utc") or "").split("-")[0].replace(":", ""),
        run["machine"]["label"],
        fig["kind"],
        fig.get("workload"),
        _dtype_short(fig.get("dtype")),
        run.get("cpu_isa"),
        *loads,
        fig.get("variant"),
    ]
    return f"{slug(*parts)}.json"


def slug(*parts: object) -> str:
    """The parts in a file name: lower case, each run of other characters than letters, digits and dots a dash."""
    return "-".join(re.sub(r"[^a-z0-9.]+", "-", str(p).lower()).strip("-") for p in parts if p)


def save(data: dict[str, Any], result_dir: str, filename: str | None) -> Path:
    """Write the record into `result_dir` under `filename` (default file_name(), with -2, -3, ... when taken)."""
    folder = Path(result_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (filename or file_name(data))
    n = 2
    while filename is None and path.exists():
        path = folder / f"{file_name(data).removesuffix('.json')}-{n}.json"
        n += 1
    write(data, path)
    return path


def check_destinations(json_path: str | None, result_dir: str | None) -> None:
    """A ValueError before the run, not after it, where its record could not be written (--json's folder,
    --result-dir)."""
    folders = [(f"--json {json_path}", Path(json_path).resolve().parent)] if json_path else []
    if result_dir is not None:
        try:
            Path(result_dir).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ValueError(f"--result-dir {result_dir}: cannot make it ({exc.strerror})") from None
        folders.append((f"--result-dir {result_dir}", Path(result_dir)))
    for flag, folder in folders:
        if not folder.is_dir() or not os.access(folder, os.W_OK):
            raise ValueError(f"{flag}: {folder} is not a folder this user can write to")


def write(data: dict[str, Any], path: Path | str) -> None:
    with open(path, "wb") as f:
        f.write(msgspec.json.format(msgspec.json.encode(data), indent=2))
        f.write(b"\n")


def _dtype_short(dtype: str | None) -> str | None:
    return {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}.get(dtype or "", dtype)


# ---- figures: what the results tables compare, per kind of benchmark -------------------------------


def figures(result: Any) -> dict[str, Any]:
    """The comparisons of `result` the results tables read (and the summary ratios of every benchmark)."""
    kind = type(result).__name__
    if kind == "ThroughputResult":
        return _throughput(result)
    if kind == "ServeVsVLLMResult":
        return _serve_vs_vllm(result)
    if kind == "ServeResult":
        return _serve(result)
    if kind == "OpsResult":
        return _ops(result)
    if kind == "RooflineResult":
        return _roofline(result)
    return {"kind": kind.removesuffix("Result").lower(), "workload": _workload(result), "dtype": _dtype(result)}


def _workload(result: Any) -> str | None:
    workload = getattr(result, "workload", None)
    return getattr(workload, "name", None)  # bench scheduling's `workload` is its rows, not a spec


def _dtype(result: Any) -> str:
    return getattr(result, "dtype", None) or str(result.engine_args.get("dtype") or "float32")


def _span(values: list[float]) -> list[float] | None:
    return [min(values), max(values)] if values else None


def _throughput(result: Any) -> dict[str, Any]:
    """A row per vLLM engine (its cores and competing load) against ours under the same load; without vLLM
    a row per load of ours."""
    from enginetui.bench.competing import mode_label

    base = result.reference.split("+")[0]

    def ours(load: str) -> dict[str, Any]:
        runs = [r for r in result.runs if r.label == mode_label(base, load)]
        cores = [r.engine_cores for r in runs if r.engine_cores is not None]
        return {
            "load": load,
            "ours_output_tok_s": _span([r.output_tokens_per_s for r in runs]),
            "ours_engine_cores": _span(cores),
            "ours_vs_alone": result.competing_ratio.get(load),
        }

    rows = []
    for label in result.vllm_best:
        runs = [r for r in result.vllm_runs if r.label == label]
        load = runs[0].competing
        alone = result.vllm_best.get(mode_label(f"vllm-{runs[0].cores}", "none"))
        best = result.vllm_best[label].output_tokens_per_s
        rows.append(
            {
                **ours(load),
                "vllm_cores": runs[0].cores,
                "vllm_output_tok_s": _span([r.output_tokens_per_s for r in runs]),
                "vllm_vs_alone": best / alone.output_tokens_per_s if alone and load != "none" else None,
                "ours_vs_vllm": result.vllm_ratio.get(label),
            }
        )
    if not rows:
        rows = [ours(load) for load in dict.fromkeys(r.competing for r in result.runs)]
    agreement = result.vllm_agreement
    return {
        "kind": "throughput",
        "workload": result.workload.name,
        "dtype": result.dtype,
        "passes": max(r.repeat for r in result.runs) + 1,
        "vllm_version": result.vllm_version,
        "rows": rows,
        "greedy_identical": f"{agreement.identical_requests}/{agreement.num_requests}" if agreement else None,
        "events_ratio": result.events_ratio or None,
        "record_ratio": result.record_ratio,
        "ours_vs_hf": result.hf_ratio,
    }


def _serve_vs_vllm(result: Any) -> dict[str, Any]:
    """Ours / vLLM's server at each rate: output tok/s, TTFT and TPOT p50 (medians of the passes)."""
    steps = result.steps
    return {
        "kind": "serve-vs-vllm-server",
        "workload": result.workload.name,
        "dtype": _dtype(result),
        "passes": result.repeats,
        "num_prompts": result.workload.num_prompts,
        "vllm_version": result.vllm_version,
        "rates": result.request_rates,
        "output_tok_s_ratio": [r["output tok/s"] for r in result.ratios],
        "ttft_p50_ratio": [r["TTFT p50 ms"] for r in result.ratios],
        "tpot_p50_ratio": [r["TPOT p50 ms"] for r in result.ratios],
        "step_time_ratio": steps.ours_total_ms / steps.vllm_total_ms if steps and steps.vllm_total_ms else None,
    }


def _serve(result: Any) -> dict[str, Any]:
    """The server's own cost (its output tok/s / LLM.generate's, best passes), ours and vLLM's."""
    ours, vllm = result.overhead, result.vllm_overhead
    return {
        "kind": "serve-overhead" if ours is not None else "serve",
        "workload": result.workload.name,
        "dtype": _dtype(result),
        "passes": len(ours.http_s) if ours else 1,
        "ours_server_vs_generate": ours.ratio if ours else None,
        "vllm_server_vs_generate": vllm.ratio if vllm else None,
        "servers_ours_vs_vllm": ours.http_tok_s / vllm.http_tok_s if ours and vllm else None,
        "generate_ours_vs_vllm": ours.generate_tok_s / vllm.generate_tok_s if ours and vllm else None,
        "ttft_p50_ms": result.run.ttft_ms.p50,
        "tpot_p50_ms": result.run.tpot_ms.p50,
        "output_tok_s": result.run.output_tokens_per_s,
    }


def _ops(result: Any) -> dict[str, Any]:
    """Per step shape, the median ms of each kind of work and of the unprofiled step ("step"): [ours, vLLM's]
    (ours alone without vLLM), and ours / vLLM's."""
    shapes = []
    for row in result.rows:
        m = row.median_ms
        ms = {kind: [m["ours"][kind], *([m["vllm"][kind]] if "vllm" in m else [])] for kind in m["ours"]}
        ratio = {kind: v[0] / v[1] for kind, v in ms.items() if len(v) == 2 and v[1] > 0.005}
        shapes.append({"batch_size": row.batch_size, "prompt_len": row.prompt_len, "ms": ms, "ratio": ratio})
    first = result.rows[0].passes if result.rows else []
    return {
        "kind": "ops",
        "dtype": result.dtype,
        "input_len": result.input_len,
        "passes": sum(p.engine == "ours" for p in first) or None,
        "vllm_version": result.vllm_version,
        "shapes": shapes,
    }


def _roofline(result: Any) -> dict[str, Any]:
    """The limits, and per step kind its floor, the median step ms and the fraction of the roofline reached:
    [ours, vLLM's] (ours alone without vLLM)."""
    engines = ("ours", "vllm")
    lim = result.limits
    return {
        "kind": "roofline",
        "dtype": result.dtype,
        "vllm_version": result.vllm_version,
        "bandwidth_gb_s": lim.bandwidth_gb_s,
        "gemm_gflop_s": lim.gemm_gflop_s,
        "gemm_path": lim.gemm_path,
        "threads": lim.threads,
        "steps": [
            {
                "kind": row.kind,
                "floor_ms": row.floor_ms,
                "bound": row.bound,
                "ms": [row.ops.median_ms[e]["step"] for e in engines if e in row.ops.median_ms],
                "fraction": [row.fraction[e] for e in engines if e in row.fraction],
            }
            for row in result.rows
        ],
    }
