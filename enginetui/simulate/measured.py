"""A recorded run of this engine measured as the simulator reports its own runs, and compared with the
simulator's run of the same requests (tools/sim_accuracy.py prints the comparison).

Both sides are defined alike: a request arrives when the recorded engine received it (kept within the step
it came in during: from_recording.py) and a token is out when its step's event was built, so with the
recording's own step times (`recorded`) every figure matches and with a fitted or roofline model the
differences are the model's error. Steps the recorded engine ran on fewer CPU threads than it has (a busy
neighbour: core/worker/thread_governor.py) are counted: a machine no step-time model describes.
"""

import math
from array import array
from typing import Any

from enginetui.core.record.reader import read_recording
from enginetui.export.steps import step_ms
from enginetui.simulate.from_recording import recorded_run
from enginetui.simulate.simulator import RequestTimes, SimRun, Timeline
from enginetui.simulate.summary import Summary, summarize

FIGURES = (
    ("duration s", "duration_s"),
    ("request throughput", "request_throughput"),
    ("output tok/s", "output_throughput"),
    ("TTFT p50 ms", "ttft.p50"),
    ("TTFT p90 ms", "ttft.p90"),
    ("TPOT p50 ms", "tpot.p50"),
    ("ITL p50 ms", "itl.p50"),
    ("E2E p50 ms", "e2e.p50"),
)


def measured_run(path: str) -> SimRun:
    """The recorded run as the simulator would have reported it."""
    recorded = recorded_run(path)
    reqs = sorted(recorded.requests, key=lambda r: r.arrival)
    n = len(reqs)
    index = {r.request_id: k for k, r in enumerate(reqs)}
    nan = float("nan")
    times = RequestTimes(
        array("d", (r.arrival for r in reqs)),
        array("d", [nan]) * n,
        array("d", [nan]) * n,
        array("l", [0]) * n,
        array("l", [0]) * n,
        array("f"),
    )
    tl = Timeline(*(array("d") for _ in range(2)), *(array("l") for _ in range(6)))
    last = [nan] * n
    rejected = []  # the run's refused requests, in order
    for event in read_recording(path).events():
        if event.is_step:
            for req_id, ids in event.new_token_ids.items():
                k = index[req_id]
                if math.isnan(times.first_token[k]):
                    times.first_token[k] = event.time
                else:
                    times.itl.append(event.time - last[k])
                last[k] = event.time
                times.num_output[k] += len(ids)
            for p in event.preempted:
                times.num_preemptions[index[p.req_id]] += 1
            tl.end.append(event.time)
            tl.seconds.append((event.sched_ms + event.exec_ms + event.update_ms) / 1e3)
            tl.num_prefill_tokens.append(event.num_prefill_tokens)
            tl.num_decode_tokens.append(event.num_decode_tokens)
            tl.num_running.append(len(event.running))
            tl.num_waiting.append(len(event.waiting))
            tl.kv_used_blocks.append(event.num_blocks - event.num_free_blocks)
            tl.num_preempted.append(len(event.preempted))
        for end in event.finished:
            if end.req_id in index:
                times.finish[index[end.req_id]] = event.time
        rejected += [r for r in event.rejected if r.req_id in index]
    return SimRun(
        reqs, times, tl, recorded.num_blocks, len(rejected), rejected[0].detail if rejected else "", "measured", 0.0
    )


def fewer_threads(path: str) -> tuple[int, int, float]:
    """(steps the recorded engine ran on fewer CPU threads than it has, its steps, the share of its
    steps' time those took)."""
    recorded = recorded_run(path)
    seconds = [step_ms(e) for e in recorded.steps]
    fewer = [s for e, s in zip(recorded.steps, seconds) if recorded.on_fewer_threads(e)]
    return len(fewer), len(recorded.steps), sum(fewer) / sum(seconds) if sum(seconds) else 0.0


def fewer_threads_line(counts: tuple[int, int, float]) -> str:
    """What `fewer_threads` found, in words ("" when every step ran on all the engine's threads)."""
    fewer, total, share = counts
    if not fewer:
        return ""
    return (
        f"{fewer} of the measured run's {total} steps ran on fewer CPU threads than the engine has "
        f"({share:.0%} of its step time): another process was competing for the cores"
    )


def figure(summary: Summary, name: str) -> float:
    value: Any = summary  # then the attribute `name` names, part by part
    for part in name.split("."):
        value = getattr(value, part)
    return float(value)


def compare_recording(path: str, step_times: str, **settings) -> list[tuple[str, float, float, float]]:
    """(figure, measured, predicted, error in percent) for each of FIGURES."""
    from enginetui.simulate.api import simulate

    measured = summarize(measured_run(path))
    predicted = simulate(from_recording=path, step_times=step_times, **settings).summary
    rows = []
    for label, name in FIGURES:
        m, p = figure(measured, name), figure(predicted, name)
        rows.append((label, m, p, (p - m) / m * 100 if m else float("nan")))
    return rows
