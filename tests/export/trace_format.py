"""What every Chrome Trace Event Format file (Perfetto's JSON) must hold, checked on an exported trace; and
Perfetto's own parser on it."""

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

PHASES = {"X", "C", "M", "i"}  # the trace-event phases the export writes


def check_trace_event_format(trace: dict) -> None:
    """The JSON Object Format's rules for the phases used: fields and types, and complete events
    ("X") on one thread nested (a slice ends before its parent does), as trace viewers require."""
    assert isinstance(trace["traceEvents"], list) and trace["displayTimeUnit"] in ("ms", "ns")
    by_thread: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for e in trace["traceEvents"]:
        assert e["ph"] in PHASES and isinstance(e["name"], str) and isinstance(e["pid"], int), e
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name", "thread_sort_index") and e["args"], e
            continue
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
        if e["ph"] == "C":
            assert e["args"] and all(isinstance(v, (int, float)) for v in e["args"].values()), e
        elif e["ph"] == "i":
            assert e["s"] in ("t", "p", "g") and isinstance(e["tid"], int), e
        else:
            assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0 and isinstance(e["tid"], int), e
            by_thread.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for slices in by_thread.values():
        open_ends: list[float] = []
        for start, end in sorted(slices, key=lambda s: (s[0], -s[1])):
            while open_ends and open_ends[-1] <= start + 1e-6:  # back to back (ts + dur: a float's last digit)
                open_ends.pop()
            assert not open_ends or end <= open_ends[-1] + 1e-6, (start, end, open_ends)
            open_ends.append(end)


@contextmanager
def perfetto_trace_processor(trace: dict, folder: Path) -> Iterator:
    """Perfetto's TraceProcessor on `trace` (written into `folder`), closed after; the test is skipped where it
    cannot run (it needs its trace_processor_shell binary, which it downloads)."""
    tp_module = pytest.importorskip("perfetto.trace_processor")
    path = folder / "trace.json"
    path.write_text(json.dumps(trace))
    try:
        tp = tp_module.TraceProcessor(trace=str(path), config=tp_module.TraceProcessorConfig(load_timeout=20))
    except Exception as exc:  # offline: the binary cannot be downloaded
        pytest.skip(f"Perfetto's trace processor cannot run here: {str(exc).splitlines()[0][:200]}")
    try:
        yield tp
    finally:
        tp.close()
