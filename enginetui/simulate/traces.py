"""Real request traces as workloads: each request's own arrival time and token lengths.

Formats, told apart by the file's first line:
- Azure LLM inference (CSV `TIMESTAMP,ContextTokens,GeneratedTokens`, wall-clock timestamps);
- BurstGPT (CSV with `Timestamp`, `Request tokens`, `Response tokens`: seconds from the start; rows
  with no response tokens, failed requests, are left out);
- Mooncake (JSON lines `timestamp` in ms, `input_length`, `output_length`, `hash_ids`: one id per
  512-token block of the prompt, equal leading ids = a shared prefix).

Mooncake's blocks become real tokens: block id h always holds the same 512 tokens (a hash of h and
the position), so two prompts with equal leading ids share those tokens and prefix caching finds them.
Arrivals start at 0 (the first request, or the window's start), divided by the time scale.
"""

import csv
import json
import os
from dataclasses import dataclass
from pathlib import Path

from enginetui.flags.traces import OVER_CONTEXT_RULES, TRACE_DATASETS
from enginetui.simulate.workload import SimRequest

TRACES_ENV = "ENGINETUI_TRACES_DIR"  # where the named traces are (default: shared/traces beside the checkout)


@dataclass(frozen=True, slots=True)
class TraceRow:
    """One request of a trace, as read."""

    arrival: float  # seconds from the trace's first request
    prompt_len: int  # prompt tokens
    output_len: int  # generated tokens
    hash_ids: tuple[int, ...] | None = None  # Mooncake: the prompt's 512-token blocks


@dataclass(slots=True)
class Trace:
    """A trace file, read: its format and rows (in arrival order)."""

    path: str  # the file
    format: str  # "azure", "burstgpt" or "mooncake"
    rows: list[TraceRow]  # every usable request
    num_dropped: int = 0  # rows left out while reading (BurstGPT's failed requests)


def traces_dir() -> Path:
    """Where --dataset azure-conv / mooncake are read from: $ENGINETUI_TRACES_DIR, else shared/traces
    beside the checkout (the repository's parent directory)."""
    given = os.environ.get(TRACES_ENV)
    if given:
        return Path(given).expanduser()
    return Path(__file__).resolve().parents[3] / "shared" / "traces"


def dataset_path(name: str) -> Path:
    """The file of a named trace; a clear error when it is not there."""
    path = traces_dir() / TRACE_DATASETS[name]
    if not path.is_file():
        raise ValueError(
            f"--dataset {name}: {path} not found (set {TRACES_ENV} to the folder holding "
            f"{TRACE_DATASETS[name]}, or give --trace FILE)"
        )
    return path


def detect_format(path: str | Path) -> str:
    """ "azure", "burstgpt" or "mooncake" from the file's first line; ValueError naming the problem otherwise."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            first = f.readline().strip()
    except OSError as exc:
        raise ValueError(f"--trace {path}: {exc.strerror or exc}") from None
    if first.startswith("{"):
        try:
            keys = set(json.loads(first))
        except json.JSONDecodeError:
            keys = set()
        if {"timestamp", "input_length", "output_length"} <= keys:
            return "mooncake"
    columns = {c.strip() for c in first.split(",")}
    if {"TIMESTAMP", "ContextTokens", "GeneratedTokens"} <= columns:
        return "azure"
    if {"Timestamp", "Request tokens", "Response tokens"} <= columns:
        return "burstgpt"
    raise ValueError(
        f"--trace {path}: not a trace this reads (an Azure CSV with TIMESTAMP,ContextTokens,"
        f"GeneratedTokens; a BurstGPT CSV with Timestamp,Request tokens,Response tokens; or Mooncake "
        f"JSON lines with timestamp,input_length,output_length); its first line is {first[:80]!r}"
    )


def read_trace(path: str | Path) -> Trace:
    """Every request of a trace file, arrivals in seconds from its first request."""
    fmt = detect_format(path)
    reader = {"azure": _read_azure, "burstgpt": _read_burstgpt, "mooncake": _read_mooncake}[fmt]
    try:
        rows, dropped = reader(path)
    except (KeyError, ValueError, TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"--trace {path}: a {fmt} trace with a bad row ({exc})") from None
    if not rows:
        raise ValueError(f"--trace {path}: no requests in it")
    rows.sort(key=lambda r: r.arrival)
    t0 = rows[0].arrival
    rows = [TraceRow(r.arrival - t0, r.prompt_len, r.output_len, r.hash_ids) for r in rows]
    return Trace(str(path), fmt, rows, dropped)


def _read_azure(path) -> tuple[list[TraceRow], int]:
    rows = []
    days: dict[str, float] = {}  # date -> its midnight, seconds since the epoch (UTC)
    with open(path, newline="") as f:
        for rec in csv.DictReader(f):
            rows.append(
                TraceRow(_wall_seconds(rec["TIMESTAMP"], days), int(rec["ContextTokens"]), int(rec["GeneratedTokens"]))
            )
    return rows, 0


def _wall_seconds(stamp: str, days: dict[str, float]) -> float:
    """`2023-11-16 18:15:46.6805900` -> seconds since the epoch (fractions past microseconds kept)."""
    from datetime import UTC, datetime

    day, _, clock = stamp.strip().partition(" ")
    if day not in days:
        days[day] = datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC).timestamp()
    hms, _, frac = clock.partition(".")
    h, m, sec = hms.split(":")
    return days[day] + int(h) * 3600 + int(m) * 60 + int(sec) + (float(f"0.{frac}") if frac else 0.0)


def _read_burstgpt(path) -> tuple[list[TraceRow], int]:
    rows, dropped = [], 0
    with open(path, newline="") as f:
        for rec in csv.DictReader(f, skipinitialspace=True):
            prompt, output = int(float(rec["Request tokens"])), int(float(rec["Response tokens"]))
            if prompt < 1 or output < 1:  # a failed request: it generated nothing
                dropped += 1
                continue
            rows.append(TraceRow(float(rec["Timestamp"]), prompt, output))
    return rows, dropped


def _read_mooncake(path) -> tuple[list[TraceRow], int]:
    rows = []
    with open(path) as f:
        for line in f:
            if line.strip():
                rec = json.loads(line)
                ids = rec.get("hash_ids")
                rows.append(
                    TraceRow(
                        rec["timestamp"] / 1e3,
                        int(rec["input_length"]),
                        int(rec["output_length"]),
                        tuple(int(h) for h in ids) if ids else None,
                    )
                )
    return rows, 0


def parse_window(text: str | None) -> tuple[float, float] | None:
    """`START:END` seconds (either side may be empty: the trace's start / end) -> (start, end)."""
    if not text:
        return None
    start, sep, end = text.partition(":")
    try:
        window = (float(start) if start.strip() else 0.0, float(end) if end.strip() else float("inf"))
    except ValueError:
        window = None
    if not sep or window is None:
        raise ValueError(f"--trace-window {text!r}: write START:END in seconds, e.g. 0:60")
    if not window[1] > window[0] or window[0] < 0:
        raise ValueError(f"--trace-window {text}: the end must come after the start (both seconds, from 0)")
    return window


def trace_workload(
    trace: Trace, window: tuple[float, float] | None, time_scale: float, max_model_len: int, over_context: str
) -> tuple[list[SimRequest], list[str]]:
    """The trace's requests in `window` (trace seconds, [start, end)), arrivals from the window's start
    divided by `time_scale`, fitted to `max_model_len` by `over_context`; and notes saying what was done."""
    if not time_scale > 0:
        raise ValueError(f"--time-scale must be positive, got {time_scale}")
    if over_context not in OVER_CONTEXT_RULES:
        raise ValueError(f"--over-context must be one of {', '.join(OVER_CONTEXT_RULES)}, got {over_context!r}")
    rows = trace.rows
    start = 0.0
    if window is not None:
        start, end = window
        rows = [r for r in rows if start <= r.arrival < end]
        if not rows:
            last = trace.rows[-1].arrival
            raise ValueError(
                f"--trace-window {start:g}:{end:g}: no request of {trace.path} arrives in it "
                f"(its requests arrive from 0 to {last:.1f} s)"
            )
    requests, clipped, skipped = [], 0, 0
    for k, r in enumerate(rows):
        prompt_len, output_len = r.prompt_len, r.output_len
        if prompt_len + output_len > max_model_len:
            if over_context == "skip":
                skipped += 1
                continue
            clipped += 1
            output_len = min(output_len, max_model_len // 2)
            prompt_len = min(prompt_len, max_model_len - output_len)
        requests.append(
            SimRequest(f"trace-{k}", (r.arrival - start) / time_scale, prompt_len, output_len, hash_ids=r.hash_ids)
        )
    if not requests:
        raise ValueError(
            f"every request of {trace.path} in the window is longer than max_model_len {max_model_len} "
            f"(--over-context skip): raise --max-model-len or clip them"
        )
    notes = []
    if clipped:
        notes.append(
            f"{clipped} of {len(rows)} trace requests are longer than max_model_len {max_model_len}: "
            f"clipped to fit (output to at most half of it, then the prompt; --over-context skip drops them)"
        )
    if skipped:
        notes.append(
            f"{skipped} of {len(rows)} trace requests are longer than max_model_len {max_model_len}: "
            f"skipped (--over-context skip)"
        )
    if trace.num_dropped:
        notes.append(f"{trace.num_dropped} rows of {trace.path} with no response tokens (failed requests) left out")
    return requests, notes


def trace_requests(s, max_model_len: int, notes: list[str] | None = None) -> list[SimRequest]:
    """The requests of the trace the flags `s` name (trace or dataset, trace_window, time_scale, over_context:
    SimSettings or the parsed flags), arrivals set: what `simulate` serves and `bench serve` sends."""
    trace = read_trace(s.trace or dataset_path(s.dataset))
    requests, trace_notes = trace_workload(
        trace, parse_window(s.trace_window), s.time_scale, max_model_len, s.over_context
    )
    if notes is not None:
        notes.extend(trace_notes)
    return requests
