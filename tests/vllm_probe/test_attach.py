"""`enginetui attach --probe ADDR`: the dashboard fed by a probe's step events, read only.

A stand-in publisher (fake_probe.py) sends the events a real vLLM 0.32's probe published during a
burst; the dashboard must show exactly what they say.
"""

import msgspec
import zmq

from enginetui.cli import main
from enginetui.core.engine.event_publisher import EventPublisher
from enginetui.dashboard.state import DashboardState
from enginetui.dashboard.widgets.event_log import EventLog
from enginetui.dashboard.widgets.title_bar import TitleBar
from enginetui.vllm_probe.attach import PROBE_READ_ONLY, ProbeEngine, ProbeWatchTUI
from tests.support.pilot import until as wait_for
from tests.vllm_probe.fake_probe import FIXTURE, publish_all, read_events, subscribed

SIZE = (120, 40)


class NotingProbeTUI(ProbeWatchTUI):
    """ProbeWatchTUI that remembers every notification it shows."""

    def __init__(self, engine: ProbeEngine) -> None:
        super().__init__(engine)
        self.notes: list[str] = []

    def notify(self, message, **kwargs) -> None:
        self.notes.append(str(message))
        super().notify(message, **kwargs)


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
            shown = " ".join(str(app.query_one(EventLog).render()).split())  # long lines wrap
            assert " ".join(folded.log[-1].text.split()) in shown
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


def test_bad_probe_flags_are_one_line_each(capsys):
    probe = ["attach", "--probe", "tcp://127.0.0.1:5600"]
    for argv in (
        ["attach", "--probe", "localhost:5600"],
        [*probe, "http://127.0.0.1:8000"],
        [*probe, "--vllm", "http://127.0.0.1:8000", "--vllm", "http://127.0.0.1:8001"],
        [*probe, "--max-num-seqs", "4"],
        [*probe, "--proxy-port", "0"],
        [*probe, "--vllm", "127.0.0.1:8000"],
        [*probe, "--vllm", "http://127.0.0.1:8000", "--kv-events", "localhost:5557"],
    ):
        assert main(argv) == 2, argv
    assert capsys.readouterr().err.strip().splitlines() == [
        "enginetui attach: --probe 'localhost:5600' is not tcp://HOST:PORT or ipc://PATH",
        "enginetui attach: a server URL beside --probe: give vLLM's as --vllm URL",
        "enginetui attach: --probe watches one vLLM: 2 --vllm URLs given",
        "enginetui attach: --max-num-seqs: the probe publishes vLLM's limits; leave them out",
        "enginetui attach: --proxy-port: only with --vllm URL",
        "enginetui attach: '127.0.0.1:8000' is not a server address: give it as http://HOST:PORT",
        "enginetui attach: --kv-events 'localhost:5557' is not tcp://HOST:PORT or ipc://PATH",
    ]


def test_record_to_a_path_that_cannot_be_written_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("enginetui.terminal_check.has_terminal", lambda: True)
    path = tmp_path / "no-such-folder" / "run.etrec"
    assert main(["attach", "--probe", f"ipc://{tmp_path}/probe.sock", "--record", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"enginetui attach: cannot record to {path}: ") and not path.exists()


def test_record_beside_a_vllm_that_does_not_answer_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("enginetui.terminal_check.has_terminal", lambda: True)
    path = tmp_path / "run.etrec"
    argv = ["attach", "--probe", f"ipc://{tmp_path}/probe.sock", "--vllm", "http://127.0.0.1:9", "--record", str(path)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("enginetui attach: --record names vLLM's model from http://127.0.0.1:9")
    assert not path.exists()
