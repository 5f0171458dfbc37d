"""A recording as two CSV tables: one row per engine step, one row per request.

Times are seconds from the recording's first event; spans (queue, TTFT, end to end) are seconds.
The request rows are the dashboard's own fold of the events (enginetui/dashboard/state.py) and the
timeline's count of prefill chunks, so they say what the dashboard said; a request's first token
is the step event that carried it.
"""

import csv
from pathlib import Path

from enginetui.core.record.reader import Recording
from enginetui.dashboard.state import DashboardState
from enginetui.dashboard.timeline import Timeline
from enginetui.export.steps import step_ms

STEP_COLUMNS = (
    "step",
    "time_s",
    "step_ms",
    "sched_ms",
    "exec_ms",
    "update_ms",
    "forward_ms",
    "sample_ms",
    "compute_threads",
    "scheduled_tokens",
    "prefill_tokens",
    "decode_tokens",
    "scheduled_requests",
    "running",
    "waiting",
    "kv_used_blocks",
    "kv_blocks",
    "kv_used_pct",
    "admitted",
    "preempted",
    "finished",
)
REQUEST_COLUMNS = (
    "req_id",
    "prompt_tokens",
    "output_tokens",
    "max_tokens",
    "cached_tokens",
    "arrival_s",
    "first_scheduled_s",
    "first_token_s",
    "finished_s",
    "queue_s",
    "ttft_s",
    "e2e_s",
    "preemptions",
    "prefill_chunks",
    "finish_reason",
    "detail",
)


def write_tables(recording: Recording, out_dir: str | Path) -> list[Path]:
    """Write steps.csv and requests.csv into `out_dir` (created); returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    events = list(recording.events())
    origin = events[0].time if events else 0.0
    state = DashboardState(timeline=Timeline(max_lanes=None))
    steps: list[tuple] = []
    first_tokens: dict[str, float] = {}
    for event in events:
        state.apply_event(event)
        if event.is_step:
            steps.append(_step_row(event, origin))
            for req_id in event.new_token_ids:
                first_tokens.setdefault(req_id, event.time)  # the step that produced its first token
    requests = [_request_row(view, state, first_tokens.get(view.req_id), origin) for view in state.requests.values()]
    paths = [out / "steps.csv", out / "requests.csv"]
    for path, columns, rows in zip(paths, (STEP_COLUMNS, REQUEST_COLUMNS), (steps, requests)):
        with path.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(columns)
            writer.writerows(rows)
    return paths


def _step_row(e, origin: float) -> tuple:
    used = e.num_blocks - e.num_free_blocks
    return (
        e.step,
        _s(e.time - origin),
        _ms(step_ms(e)),
        _ms(e.sched_ms),
        _ms(e.exec_ms),
        _ms(e.update_ms),
        _ms(e.forward_ms),
        _ms(e.sample_ms),
        e.compute_threads,
        e.num_scheduled_tokens,
        e.num_prefill_tokens,
        e.num_decode_tokens,
        len(e.scheduled),
        len(e.running),
        len(e.waiting),
        used,
        e.num_blocks,
        round(100.0 * used / e.num_blocks, 2) if e.num_blocks else 0.0,
        len(e.admitted),
        len(e.preempted),
        len(e.finished),
    )


def _request_row(view, state: DashboardState, first_token: float | None, origin: float) -> tuple:
    lane = state.timeline.lanes.get(view.req_id)
    at = lambda t: "" if t is None else _s(t - origin)  # noqa: E731
    since_arrival = lambda t: "" if t is None or view.arrival_time is None else _s(t - view.arrival_time)  # noqa: E731
    return (
        view.req_id,
        view.num_prompt_tokens,
        view.num_output_tokens,
        view.max_tokens,
        view.num_cached_tokens,
        at(view.arrival_time),
        at(view.first_scheduled_time),
        at(first_token),
        at(view.finished_time),
        since_arrival(view.first_scheduled_time),
        since_arrival(first_token),
        since_arrival(view.finished_time),
        view.num_preemptions,
        lane.num_chunks if lane else 0,
        view.finish_reason or "",
        view.detail,
    )


def _s(seconds: float) -> float:
    return round(seconds, 6)


def _ms(ms: float) -> float:
    return round(ms, 3)
