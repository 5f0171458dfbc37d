"""A recording as a Chrome trace-event JSON file (opens in ui.perfetto.dev and chrome://tracing).

    process "engine":   thread "steps"   - a slice per engine step, split into schedule / execute / update
                        threads "busy loop" and "model" - each step's schedule and update, and its
                                         execution, at the wall-clock times the events give (with
                                         async scheduling the plan of step N+1 overlaps N's execution)
                        counters         - KV usage, running, waiting, batch tokens (prefill / decode),
                                           CPU threads (steps that ran a model on a CPU)
    process "requests": a thread per request - its phases (waiting, prefill, decode, recompute, ...)
                        as slices, preemptions and its end as instants
    process "vLLM /metrics" (a recording of `attach --vllm`): counters from each reading - running,
                        waiting, KV usage as vLLM publishes them, and the rates between readings
                        (tokens/s generated and prompted, preemptions/s), as the dashboard shows them

Times are microseconds from the recording's first event. The request phases are the timeline's
(enginetui/dashboard/timeline.py), each step mapped to when it ran.
"""

from enginetui.core.engine.events import Preemption, RequestEnd, StepEvent
from enginetui.core.record.reader import Recording
from enginetui.dashboard.timeline import WAITING, Lane, Timeline
from enginetui.export.steps import StepClock, StepSpan
from enginetui.vllm_watch import prometheus as m
from enginetui.vllm_watch import vllm_record

ENGINE_PID, REQUESTS_PID, VLLM_PID = 1, 2, 3  # trace processes
STEPS_TID = 1  # the engine's step thread
BUSY_LOOP_TID, MODEL_TID = 2, 3  # where schedule / update and execute ran (from the events' phases)
PHASE_NAMES = {
    "waiting": "waiting",
    "prefill": "prefill",
    "decode": "decode",
    "stalled": "running (no tokens this step)",
    "requeued": "waiting (preempted)",
    "recompute": "recompute",
}  # timeline phase -> slice name


def perfetto_trace(recording: Recording) -> dict:
    """The trace as a JSON-ready dict ({"traceEvents": [...], ...})."""
    events = list(recording.events())
    readings = _vllm_readings(recording)
    origin = _origin(events, readings)
    us = lambda t: round((t - origin) * 1e6, 3)  # noqa: E731  (time.time() -> trace microseconds)
    trace = [
        _name("process_name", ENGINE_PID, 0, "engine"),
        _name("thread_name", ENGINE_PID, STEPS_TID, "steps"),
        _name("thread_name", ENGINE_PID, BUSY_LOOP_TID, "busy loop (schedule, update)"),
        _name("thread_name", ENGINE_PID, MODEL_TID, "model (execute)"),
        _name("process_name", REQUESTS_PID, 0, "requests"),
    ]
    spans, steps_end = [], 0.0
    for event in events:
        if event.is_step:
            span = StepSpan.of(event)
            spans.append(span)
            # back to back steps: the next starts where this one ended, not a rounding's nanosecond before
            step = _step_slices(event, max(us(span.start), steps_end), span)
            steps_end = step[0]["ts"] + step[0]["dur"]
            trace += step
            trace += _phase_slices(event, us)
        if not event.is_snapshot or event is events[0]:
            trace += _counters(event, us(event.time))
    if spans:
        trace += _request_tracks(events, StepClock(spans), us)
    if readings:
        trace += [_name("process_name", VLLM_PID, 0, "vLLM /metrics"), *_vllm_counters(readings, us)]
    header = recording.header
    return {
        "traceEvents": trace,
        "displayTimeUnit": "ms",
        "metadata": {"model": header.engine.model_name, "recorded by": header.source, "device": header.engine.device},
    }


def _origin(events: list[StepEvent], readings: list) -> float:
    """The trace's time 0: its earliest moment (the first step began before its event; a request can arrive
    before the event that adds it; vLLM's /metrics can be read before vLLM's first step)."""
    times = [e.time for e in events[:1]] + [r.time for r in readings[:1]]
    first_step = next((e for e in events if e.is_step), None)
    if first_step is not None:
        times += [StepSpan.of(first_step).start, *(p.start for p in first_step.phases)]
    times += [a.arrival_time for e in events for a in e.added if a.arrival_time > 0]  # 0: not known
    return min(times, default=0.0)


def _name(kind: str, pid: int, tid: int, name: str) -> dict:
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": {"name": name}}


def _slice(name: str, ts: float, dur: float, pid: int, tid: int, args: dict | None = None) -> dict:
    return {"ph": "X", "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args or {}}


def _instant(name: str, ts: float, pid: int, tid: int, args: dict) -> dict:
    return {"ph": "i", "s": "t", "name": name, "ts": ts, "pid": pid, "tid": tid, "args": args}


def _step_slices(event: StepEvent, start: float, span: StepSpan) -> list[dict]:
    """The step and its three phases, back to back inside it. With asynchronous scheduling the step
    alone (its phases overlap the next and previous steps': they are on the busy-loop and model tracks)."""
    if event.async_scheduling:
        args = {
            "planned step": event.planned_step,
            "executed step": event.executed_step,
            "scheduled tokens": event.num_scheduled_tokens,
            "requests": len(event.scheduled),
        }
        return [
            _slice(f"step {event.step}", start, round((span.end - span.start) * 1e6, 3), ENGINE_PID, STEPS_TID, args)
        ]
    parts = [
        ("schedule", round(event.sched_ms * 1e3, 3)),
        ("execute", round(event.exec_ms * 1e3, 3)),
        ("update", round(event.update_ms * 1e3, 3)),
    ]
    args = {
        "scheduled tokens": event.num_scheduled_tokens,
        "prefill tokens": event.num_prefill_tokens,
        "decode tokens": event.num_decode_tokens,
        "requests": len(event.scheduled),
    }
    out = [_slice(f"step {event.step}", start, sum(d for _, d in parts), ENGINE_PID, STEPS_TID, args)]
    at = start
    for name, dur in parts:
        out.append(_slice(name, at, dur, ENGINE_PID, STEPS_TID))
        at += dur
    return out


def _phase_slices(event: StepEvent, us) -> list[dict]:
    """The step's schedule / execute / update spans where they ran: the busy loop and the model thread."""
    out = []
    for phase in event.phases:
        tid = MODEL_TID if phase.name == "execute" else BUSY_LOOP_TID
        out.append(
            _slice(
                f"{phase.name} step {phase.step}",
                us(phase.start),
                max(0.0, round(us(phase.end) - us(phase.start), 3)),
                ENGINE_PID,
                tid,
                {"step": phase.step, "async scheduling": event.async_scheduling},
            )
        )
    return out


def _counters(event: StepEvent, ts: float) -> list[dict]:
    used = event.num_blocks - event.num_free_blocks
    values = {
        "KV usage %": {"used": round(100.0 * used / event.num_blocks, 2) if event.num_blocks else 0.0},
        "running": {"requests": len(event.running)},
        "waiting": {"requests": len(event.waiting)},
        "batch tokens": {
            "prefill": event.num_prefill_tokens if event.is_step else 0,
            "decode": event.num_decode_tokens if event.is_step else 0,
        },
    }
    if event.is_step and event.compute_threads:  # a model step on a CPU: fewer threads beside a busy process
        values["CPU threads"] = {"threads": event.compute_threads}
    return [{"ph": "C", "name": name, "ts": ts, "pid": ENGINE_PID, "args": args} for name, args in values.items()]


def _vllm_readings(recording: Recording) -> list[m.MetricsSample]:
    """vLLM's /metrics readings in the recording's V frames (none in other recordings)."""
    items = (vllm_record.decode(payload) for _, payload in recording.vllm_items())
    return [item.sample for item in items if isinstance(item, vllm_record.Metrics)]


def _vllm_counters(readings: list[m.MetricsSample], us) -> list[dict]:
    """A counter per figure at each reading: vLLM's gauges (summed over its engines; KV usage their mean), and
    each counter's growth since the reading before over the time between (none across a restart: counters
    that went down)."""
    out, prev = [], None
    for sample in readings:
        kv = sample.per_engine(m.KV_USAGE)
        values = {
            "vLLM running": {"requests": sample.total(m.RUNNING)},
            "vLLM waiting": {"requests": sample.total(m.WAITING)},
            "vLLM KV usage %": {"used": round(100.0 * sum(kv.values()) / len(kv), 2) if kv else None},
        }
        if prev is not None and sample.time > prev.time:
            grew = {
                name: (sample.total(name) or 0.0) - (prev.total(name) or 0.0)
                for name in (m.GENERATION_TOKENS, m.PROMPT_TOKENS, m.PREEMPTIONS)
            }
            if min(grew.values()) >= 0:
                span = sample.time - prev.time
                values["vLLM tokens/s"] = {
                    "generated": round(grew[m.GENERATION_TOKENS] / span, 3),
                    "prompt": round(grew[m.PROMPT_TOKENS] / span, 3),
                }
                values["vLLM preemptions/s"] = {"preemptions": round(grew[m.PREEMPTIONS] / span, 3)}
        prev = sample
        ts = us(sample.time)
        out += [
            {"ph": "C", "name": name, "ts": ts, "pid": VLLM_PID, "args": args}
            for name, args in values.items()
            if None not in args.values()  # a gauge this vLLM did not publish
        ]
    return out


def _request_tracks(events: list[StepEvent], clock: StepClock, us) -> list[dict]:
    """A thread per request: its phases as slices, its preemptions and its end as instants."""
    timeline = Timeline()
    arrivals: dict[str, float] = {}
    ends: dict[str, tuple[float, RequestEnd]] = {}
    preemptions: dict[tuple[str, int], tuple[float, Preemption]] = {}
    for event in events:
        timeline.apply(event)
        for added in event.added:
            arrivals[added.req_id] = added.arrival_time
        for end in (*event.finished, *event.rejected):
            ends.setdefault(end.req_id, (event.time, end))
        for pre in event.preempted:
            preemptions[(pre.req_id, event.step)] = (event.time, pre)
    out = []
    for tid, lane in enumerate(timeline.lanes.values(), start=1):
        out.append(_name("thread_name", REQUESTS_PID, tid, lane.req_id))
        out.append(
            {"ph": "M", "name": "thread_sort_index", "pid": REQUESTS_PID, "tid": tid, "args": {"sort_index": tid}}
        )
        out += _lane_slices(lane, clock, arrivals.get(lane.req_id), us, tid)
        for step in lane.preemptions:
            when, pre = preemptions[(lane.req_id, step)]
            out.append(
                _instant(
                    "preempted",
                    us(when),
                    REQUESTS_PID,
                    tid,
                    {"step": step, "lost tokens": pre.lost_tokens, "freed blocks": pre.freed_blocks},
                )
            )
        if lane.req_id in ends:
            when, end = ends[lane.req_id]
            out.append(
                _instant(
                    f"end: {end.reason}",
                    us(when),
                    REQUESTS_PID,
                    tid,
                    {"detail": end.detail, "output tokens": end.num_output_tokens},
                )
            )
    return out


def _lane_slices(lane: Lane, clock: StepClock, arrival: float | None, us, tid: int) -> list[dict]:
    out, last_end = [], None
    for phase, first, last in lane.segments:
        start, end = clock.span(first).start, clock.span(last).end
        if phase == WAITING and first == lane.first_step and arrival is not None:
            start = min(arrival, start)  # it waited from its arrival, before the step
        if last_end is not None:
            start = max(start, last_end)  # a step missing from the recording: never overlap the previous phase
        last_end = end
        out.append(
            _slice(
                PHASE_NAMES[phase],
                us(start),
                max(0.0, round(us(end) - us(start), 3)),
                REQUESTS_PID,
                tid,
                {"steps": f"{first}-{last}" if last > first else str(first)},
            )
        )
    return out
