"""What every Chrome Trace Event Format file (Perfetto's JSON) must hold, checked on an exported trace."""

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
