"""`enginetui attach --probe ADDR --record FILE`: a real vLLM's step events (the recorded burst, from the stand-in
publisher) written in our engine's recording format, then replayed, exported and simulated as our engine's are."""

import asyncio
import csv
import json

import pytest
import zmq

from enginetui.cli import main
from enginetui.core.engine.event_publisher import EventPublisher
from enginetui.core.engine.events import StepEvent
from enginetui.core.models.default_model import DEFAULT_MODEL_DIR
from enginetui.core.record.reader import read_recording
from enginetui.dashboard.state import DashboardState
from enginetui.replay.session import ReplaySession
from enginetui.simulate import calibrate
from enginetui.simulate.api import simulate
from enginetui.vllm_probe.attach import ProbeEngine
from enginetui.vllm_probe.recording import UNKNOWN_MODEL, VllmFacts
from tests.vllm_probe.fake_probe import BATCH, read_events, until
from tests.vllm_probe.live import MAX_MODEL_LEN

# What `--vllm URL` reads of the server that recorded the burst (tests/vllm_probe/live.py's vLLM)
FACTS = VllmFacts(
    str(DEFAULT_MODEL_DIR),
    str(DEFAULT_MODEL_DIR),
    MAX_MODEL_LEN,
    {"enable_prefix_caching": "True", "block_size": "32", "num_gpu_blocks": "11", "cache_dtype": "auto"},
)


async def record_burst(folder, facts: VllmFacts | None) -> tuple[str, list[StepEvent]]:
    """The burst's events published, taken by a ProbeEngine that records them; (the file, the events taken)."""
    address = f"ipc://{folder}/probe.sock"
    path = str(folder / "vllm.etrec")
    publisher = EventPublisher(zmq.Context.instance(), address)
    engine = ProbeEngine(address)
    engine.facts = facts
    recording = engine.start_recording(path, "enginetui attach --probe ADDR --record FILE")
    taken: list[StepEvent] = []

    async def read() -> None:
        taken.append(await engine.snapshot())
        async for event in engine.events():
            taken.append(event)

    reader = asyncio.ensure_future(read())
    try:
        joined: list[int] = []
        await until(lambda: joined.append(publisher.new_subscribers()) or sum(joined) > 0, "the subscription")
        events = read_events()
        for start in range(0, len(events), BATCH):
            for event in events[start : start + BATCH]:
                publisher.publish(event)
            await until(lambda start=start: len(taken) >= min(start + BATCH, len(events)), f"event {start + BATCH}")
    finally:
        reader.cancel()
        engine.shutdown()
        publisher.close()
    summary = recording.close()
    assert summary.num_events == len(taken) and summary.missed_events == 0
    return path, taken


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[str, list[StepEvent]]:
    return asyncio.run(record_burst(tmp_path_factory.mktemp("probe-rec"), FACTS))


def test_the_recording_holds_every_event_as_the_probe_published_it(recorded):
    path, taken = recorded
    events = read_events()
    assert taken == events
    recording = read_recording(path)
    assert list(recording.events()) == events and recording.trailer is not None and not recording.describe_problems()
    header = recording.header
    first = events[0]
    assert header.engine.model_name == FACTS.model and header.engine.max_model_len == MAX_MODEL_LEN
    assert (header.engine.num_blocks, header.engine.block_size) == (first.num_blocks, first.block_size)
    assert header.config == {
        "max_model_len": MAX_MODEL_LEN,
        "block_size": first.block_size,
        "max_num_batched_tokens": first.token_budget,
        "max_num_seqs": first.max_num_seqs,
        "async_scheduling": first.async_scheduling,
        "enable_prefix_caching": True,
    }
    assert header.tokenizer is not None and "tokenizer.json" in header.tokenizer.files  # the served model's, packed


def test_it_replays_each_event_as_the_live_dashboard_folded_it(recorded):
    path, _ = recorded
    session = ReplaySession(read_recording(path))
    live = DashboardState()
    for index, event in enumerate(read_events()):
        live.apply_event(event)
        if index % 50 == 0 or index == len(session) - 1:
            assert session.state_at(index) == live, index


def test_it_exports_as_perfetto_and_csv(recorded, tmp_path, capsys):
    path, _ = recorded
    events = read_events()
    assert main(["export", path, "--format", "perfetto", str(tmp_path / "trace.json")]) == 0
    trace = json.loads((tmp_path / "trace.json").read_text())
    assert trace["metadata"]["model"] == FACTS.model and trace["traceEvents"]
    assert main(["export", path, "--format", "csv", str(tmp_path / "csv")]) == 0
    with open(tmp_path / "csv" / "steps.csv") as f:
        assert len(list(csv.DictReader(f))) == sum(e.is_step for e in events)
    with open(tmp_path / "csv" / "requests.csv") as f:
        assert {row["req_id"] for row in csv.DictReader(f)} == {a.req_id for e in events for a in e.added}


def test_the_simulator_replays_vllms_steps_exactly_and_fits_its_step_times(recorded, tmp_path, capsys):
    path, _ = recorded
    events = read_events()
    busy = [e for e in events if e.is_step and e.scheduled]  # not the empty step vLLM runs once its last request ended
    result = simulate(from_recording=path, step_times="recorded", progress=False)
    assert result.summary.num_steps == len(busy) and result.summary.num_completed == 12
    assert result.summary.num_preemptions == events[-1].total_preemptions > 0
    assert main(["simulate", "--from-recording", path, "--step-times", "recorded", "--no-progress"]) == 0
    # the fit replays every step through the simulator's scheduler and refuses one that diverges
    assert main(["simulate", "--calibrate-from-recording", path, str(tmp_path / "fit.json")]) == 0
    assert json.loads((tmp_path / "fit.json").read_text())["info"]["model"] == FACTS.model


def test_a_fit_from_step_shapes_carried_by_the_events_equals_the_fit_that_replays_the_run(
    recorded, tmp_path, monkeypatch
):
    path, _ = recorded  # vLLM's events from before events carried their step's shape
    assert all(e.shape is None for e in read_events())
    replayed = []
    replay = calibrate.replayed_shapes
    monkeypatch.setattr(calibrate, "replayed_shapes", lambda *args: replayed.append(args) or replay(*args))
    old = calibrate.recorded_steps(path)
    assert len(replayed) == 1
    # the simulator replays the run on its recorded clock and records it: each event carries its step's shape
    shaped = str(tmp_path / "shaped.etrec")
    simulate(from_recording=path, step_times="recorded", progress=False, record=shaped)
    steps = [e for e in read_recording(shaped).events() if e.is_step]
    assert steps and all(e.shape is not None and e.shape.num_reqs == len(e.scheduled) for e in steps)
    new = calibrate.recorded_steps(shaped)
    assert len(replayed) == 1  # read from the events, not replayed
    assert len(new.shapes) > 100 and (new.shapes, new.seconds, new.gaps) == (old.shapes, old.seconds, old.gaps)
    old_fit, new_fit = calibrate.calibrate_from_recording(path), calibrate.calibrate_from_recording(shaped)
    assert new_fit.coefficients == old_fit.coefficients and new_fit.info.r2 == old_fit.info.r2


def test_without_vllms_url_the_recording_says_what_the_simulator_lacks(tmp_path, capsys):
    path, _ = asyncio.run(record_burst(tmp_path, None))
    header = read_recording(path).header
    assert header.engine.model_name == UNKNOWN_MODEL and header.engine.max_model_len == 0 and header.tokenizer is None
    assert main(["simulate", "--from-recording", path, "--step-times", "recorded", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "max_model_len" in err[0] and "--vllm URL" in err[0]
