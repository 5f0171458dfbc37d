"""When a recorded request arrives (from_recording.py): when the engine received it, not the start of
the step that took it in, so a measured TTFT holds the wait for the step that was running when it
came, as a predicted one does.

Recordings of the simulator's own runs on a known law: their requests arrive between step starts,
and the simulator reported each one's TTFT from its arrival, so the recording read back must give
the same figures."""

import math

import msgspec
import numpy as np
import pytest

from enginetui.core.record.reader import read_recording
from enginetui.core.record.writer import write_recording
from enginetui.simulate import from_settings
from enginetui.simulate.api import simulate
from enginetui.simulate.fitted import FitInfo, FittedModel
from enginetui.simulate.from_recording import recorded_run
from enginetui.simulate.measured import compare_recording, measured_run
from enginetui.simulate.step_time import step_start

pytestmark = pytest.mark.timeout(60)

LAW = {"constant": 8e-3, "prefill_tokens": 1e-4, "decode_tokens": 5e-4}  # seconds per unit: steps of 8-20 ms


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A simulated run at 30 req/s (arrivals ~33 ms apart, steps 8-20 ms: most arrive while a step runs,
    some at an idle engine), recorded; (its result, the recording)."""
    path = str(tmp_path_factory.mktemp("arrivals") / "run.etrec")
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(
            from_settings,
            "step_model",
            lambda s, steps: (FittedModel(LAW, FitInfo("law", "here", 0, 1.0, 0.0)), None, {}),
        )
        result = simulate(
            num_prompts=40,
            input_len=64,
            output_len=12,
            range_ratio=0.8,
            request_rate=30,
            seed=5,
            model="law",
            num_gpu_blocks_override=400,
            max_model_len=512,
            record=path,
        )
    return result, path


def _ttfts(times) -> np.ndarray:
    return np.frombuffer(times.first_token, dtype=np.float64) - np.frombuffer(times.arrival, dtype=np.float64)


def test_a_recorded_request_arrives_when_the_engine_received_it(run):
    result, path = run
    truth = {r.request_id: r.arrival for r in result.run.requests}
    recorded = recorded_run(path)
    assert {r.request_id: r.arrival for r in recorded.requests} == truth
    # most came in while a step ran: they waited for it, the start of the next step is later
    starts = [step_start(e) for e in recorded.steps]
    later = sum(1 for r in recorded.requests if starts[np.searchsorted(starts, r.arrival)] > r.arrival)
    assert later > len(truth) // 2


def test_the_measured_ttft_holds_the_wait_for_the_step_in_flight(run):
    """Read back from the recording, every request's TTFT is the one the simulator reported for it (from its
    arrival); timed from the start of the step that took it in, they came out shorter by that wait."""
    result, path = run
    measured = measured_run(path)
    assert [r.request_id for r in measured.requests] == [r.request_id for r in result.run.requests]
    assert _ttfts(measured.times) == pytest.approx(_ttfts(result.run.times), abs=1e-9)
    rows = {label: err for label, _, _, err in compare_recording(path, "recorded")}
    assert all(err == pytest.approx(0.0, abs=1e-9) for err in rows.values()), rows


def test_an_arrival_stamped_outside_its_step_is_kept_within_it(run, tmp_path):
    """A request's arrival_time is the front-end's clock reading: one taken just before the previous step
    started (the request reached the engine after it had taken in that step's requests), or a clock a little
    ahead, would put it in another step. It enters just after the previous start, or at its own start: the
    replay on the recording's step times stays exact."""
    _, path = run
    recording = read_recording(path)
    events = list(recording.events())
    steps = [k for k, e in enumerate(events) if e.is_step]
    # two requests taken in by steps that followed a busy step: one stamped early, one late
    busy = [
        k
        for j, k in enumerate(steps[1:], 1)
        if events[k].added and (events[steps[j - 1]].running or events[steps[j - 1]].waiting)
    ]
    early, late = busy[0], busy[1]
    previous_start = step_start(events[steps[steps.index(early) - 1]])
    moved = {
        events[early].added[0].req_id: previous_start - 0.5,
        events[late].added[-1].req_id: step_start(events[late]) + 0.5,
    }

    def stamped(event):
        added = [msgspec.structs.replace(a, arrival_time=moved.get(a.req_id, a.arrival_time)) for a in event.added]
        return msgspec.structs.replace(event, added=added)

    out = tmp_path / "stamped.etrec"
    write_recording(out, recording.header, [stamped(e) for e in events])
    arrivals = {r.request_id: r.arrival for r in recorded_run(str(out)).requests}
    (early_id, _), (late_id, _) = moved.items()
    assert arrivals[early_id] == math.nextafter(previous_start, math.inf)
    assert arrivals[late_id] == step_start(events[late])
    rows = {label: err for label, _, _, err in compare_recording(str(out), "recorded")}
    assert all(err == pytest.approx(0.0, abs=1e-9) for err in rows.values()), rows
