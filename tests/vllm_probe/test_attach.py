"""`enginetui attach --probe ADDR`: the dashboard fed by a probe's step events, read only.

A stand-in publisher (our engine's EventPublisher) sends the events a real vLLM 0.32's probe
published during a burst (tests/vllm_probe/fixtures/burst.msgpack, recorded by
`python -m tests.vllm_probe.live`); the dashboard must show exactly what they say.
"""

from pathlib import Path

import msgspec
import zmq

from enginetui.cli import main
from enginetui.core.engine.event_publisher import EventPublisher
from enginetui.core.engine.events import StepEvent
from enginetui.dashboard.state import DashboardState
from enginetui.dashboard.widgets.event_log import EventLog
from enginetui.dashboard.widgets.title_bar import TitleBar
from enginetui.vllm_probe.attach import PROBE_READ_ONLY, ProbeEngine, ProbeWatchTUI
from tests.support.pilot import until as wait_for

FIXTURE = Path(__file__).with_name("fixtures") / "burst.msgpack"
SIZE = (120, 40)
BATCH = 32  # events sent before waiting for the dashboard (below the publisher's per-subscriber queue)


def read_events(path: Path) -> list[StepEvent]:
    return msgspec.msgpack.decode(path.read_bytes(), type=list[StepEvent])


class NotingProbeTUI(ProbeWatchTUI):
    """ProbeWatchTUI that remembers every notification it shows."""

    def __init__(self, engine: ProbeEngine) -> None:
        super().__init__(engine)
        self.notes: list[str] = []

    def notify(self, message, **kwargs) -> None:
        self.notes.append(str(message))
        super().notify(message, **kwargs)


async def publish_all(pilot, app, publisher: EventPublisher, events: list) -> None:
    for start in range(0, len(events), BATCH):
        for event in events[start : start + BATCH]:
            publisher.publish(event)
        last = events[min(start + BATCH, len(events)) - 1].seq
        await wait_for(
            pilot, lambda last=last: app.state.latest is not None and app.state.latest.seq == last, f"event {last}"
        )


async def subscribed(pilot, publisher: EventPublisher) -> None:
    joined = []
    await wait_for(
        pilot, lambda: joined.append(publisher.new_subscribers()) or sum(joined) > 0, "the dashboard to subscribe"
    )


def test_the_recorded_burst_preempts_finishes_and_hits_the_prefix_cache():
    events = read_events(FIXTURE)
    assert any(e.preempted for e in events) and any(e.chunks for e in events)
    assert events[-1].prefix_cache_hits > 0 and len({end.req_id for e in events for end in e.finished}) == 12
    assert [e.seq for e in events] == list(range(1, len(events) + 1))  # nothing was lost while recording


async def test_the_dashboard_shows_the_probes_events_and_refuses_input(tmp_path):
    events = read_events(FIXTURE)
    address = f"ipc://{tmp_path}/probe.sock"
    publisher = EventPublisher(zmq.Context.instance(), address)
    engine = ProbeEngine(address)
    app = NotingProbeTUI(engine)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            assert app.phase == "starting" and "waiting for vLLM's next step" in app._empty_hint()
            await subscribed(pilot, publisher)
            await publish_all(pilot, app, publisher, events)
            assert app.phase == "ready" and engine.missed.total == 0
            folded = DashboardState()
            for event in events:
                folded.apply_event(event)
            assert app.state.latest == events[-1] and app.state.step == events[-1].step
            assert set(app.state.requests) == set(folded.requests)
            assert [(v.req_id, v.status) for v in app.state.ordered()] == [
                (v.req_id, v.status) for v in folded.ordered()
            ]
            assert app.state.log == folded.log and app.state.timeline == folded.timeline
            app.redraw()
            await pilot.pause()
            assert "vLLM (probe)" in str(app.query_one(TitleBar).render())
            assert any(line.kind == "preempt" for line in app.state.log)
            assert folded.log[-1].text in str(app.query_one(EventLog).render())
            for key in ("ctrl+b", "ctrl+p", "ctrl+x"):
                await pilot.press(key)
            await pilot.pause()
            assert app.notes.count(PROBE_READ_ONLY) == 3

            restarted = msgspec.structs.replace(events[0], seq=1)  # vLLM started again: its events start over
            publisher.publish(restarted)
            await wait_for(pilot, lambda: app.phase == "stopped", "the dashboard to stop")
            assert any("started over" in note for note in app.notes)
    finally:
        publisher.close()


def test_a_bad_probe_address_or_a_url_beside_it_is_one_line(capsys):
    assert main(["attach", "--probe", "localhost:5600"]) == 2
    assert main(["attach", "--probe", "tcp://127.0.0.1:5600", "--vllm", "http://127.0.0.1:8000"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "enginetui attach: --probe 'localhost:5600' is not tcp://HOST:PORT or ipc://PATH",
        "enginetui attach: --probe ADDR watches the probe alone (no URL, no --vllm flags)",
    ]
