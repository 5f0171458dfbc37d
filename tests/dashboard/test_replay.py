"""`enginetui replay`: a recording of a hand-stepped run of the real engine with the scripted model
runner (chunked prefill, a preemption) opened in the dashboard; every state it shows equals the live fold of the same events; keys step, jump,
play and say where the ends are; damaged and newer files are handled with words."""

import asyncio

import pytest
from textual.notifications import SeverityLevel

from enginetui.cli import main
from enginetui.core.record.reader import read_recording
from enginetui.dashboard.state import DashboardState
from enginetui.dashboard.widgets.prompt_bar import PromptBar
from enginetui.dashboard.widgets.requests_table import RequestsTable
from enginetui.dashboard.widgets.step_panel import StepPanel
from enginetui.dashboard.widgets.timeline import TimelinePanel
from enginetui.dashboard.widgets.title_bar import TitleBar
from enginetui.replay.app import ReplayBar, ReplayTUI
from enginetui.replay.cli import open_session
from enginetui.replay.session import ReplaySession
from tests.dashboard.scripted_recording import record_scripted_run

SIZE = (120, 40)


class NotingReplay(ReplayTUI):
    """ReplayTUI that remembers every notification it shows."""

    def __init__(self, session: ReplaySession, **kwargs) -> None:
        super().__init__(session, **kwargs)
        self.notes: list[tuple[SeverityLevel, str]] = []  # (severity, message) of each notification

    def notify(self, message, *, severity: SeverityLevel = "information", **kwargs) -> None:
        self.notes.append((severity, str(message)))
        super().notify(message, severity=severity, **kwargs)


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> str:
    return asyncio.run(record_scripted_run(tmp_path_factory.mktemp("replay") / "run.etrec"))


def live_states(path: str) -> list[DashboardState]:
    """The state after each event, folded straight from the file's events (as the live dashboard did)."""
    state, states = DashboardState(), []
    for event in read_recording(path).events():
        state.apply_event(event)
        states.append(state.clone())
    return states


def test_the_recording_holds_chunks_a_preemption_and_every_end(recording):
    events = list(read_recording(recording).events())
    assert any(e.chunks for e in events) and any(e.preempted for e in events)
    assert sorted(end.req_id for e in events for end in e.finished) == [f"r{i}" for i in range(1, 7)]


def test_replay_states_equal_the_live_fold_event_for_event_both_ways(recording):
    expected = live_states(recording)
    session = ReplaySession(read_recording(recording))
    for index in range(len(expected)):  # forward, one event at a time
        assert session.state_at(index) == expected[index], index
    for index in (len(expected) - 1, 40, 3, 65, 0, 64, 1):  # back and forth: checkpoints, then folds
        assert session.state_at(index) == expected[index], index


async def test_arrow_keys_step_through_engine_steps_and_the_panels_follow(recording):
    session = ReplaySession(read_recording(recording))
    app = NotingReplay(session)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        bar = app.query_one(ReplayBar)
        assert "event 1/67 (snapshot) · step 0 of 1–60" in str(bar.render())
        for _ in range(5):
            await pilot.press("right")
        await pilot.pause()
        assert app.state.step == 5 and session.recording.heads[app.index].kind == "step"
        assert "step 5 of 1–60" in str(bar.render())
        assert app.query_one(StepPanel)._event.step == 5  # the step panel shows that step's event
        assert app.query_one(TimelinePanel).border_title.startswith("Timeline · steps 1–5")
        await pilot.press("left", "left")
        await pilot.pause()
        assert app.state.step == 3 and app.state == live_states(recording)[app.index]
        await pilot.press("comma")  # one event back: the update before step 3's event, or step 2
        await pilot.pause()
        assert app.index == session.next_step(app.index) - 1


async def test_jumps_to_a_step_a_time_and_an_event_and_bad_targets_say_why(recording):
    session = ReplaySession(read_recording(recording))
    app = NotingReplay(session)
    async with app.run_test(size=SIZE) as pilot:
        for target, check in (
            ("30", lambda: app.state.step == 30),
            ("e10", lambda: app.index == 9),
            ("1.5s", lambda: session.seconds_at(app.index) <= 1.5 < session.seconds_at(app.index + 1)),
        ):
            await pilot.press("g")
            await pilot.pause()
            await pilot.press(*target, "enter")
            await pilot.pause()
            assert check(), target
        for target, words in (
            ("999", "no step 999 in this recording (steps 1–60)"),
            ("e0", "no event 0: the recording has events 1–67"),
            ("soon", "'soon' is not a step (123), a time (12.5s) or an event (e40)"),
        ):
            await pilot.press("g")
            await pilot.pause()
            await pilot.press(*target, "enter")
            await pilot.pause()
            assert app.notes[-1] == ("error", words)


async def test_past_either_end_says_where_it_is(recording):
    app = NotingReplay(ReplaySession(read_recording(recording)))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("left")
        assert app.notes[-1] == ("warning", "start of the recording: event 1, step 0")
        await pilot.press("end", "right")
        assert app.index == 66 and app.state.step == 60
        assert app.notes[-1] == (
            "warning",
            "end of the recording: event 67 of 67, step 60 (Home goes back to the start)",
        )
        await pilot.press("home")
        await pilot.pause()
        assert app.index == 0 and app.state.step == 0


async def test_space_plays_at_the_chosen_speed_and_pauses(recording):
    app = NotingReplay(ReplaySession(read_recording(recording)))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("minus", "minus", "minus")
        assert app.speed == 0.25 and app.notes[-1] == ("warning", "already the slowest: 0.25x")
        await pilot.press("space")  # the 3 s run at 0.25x: 12 s
        assert app.playing, app.notes
        assert "▶ playing" in str(app.query_one(ReplayBar).render())
        await asyncio.sleep(0.3)
        await pilot.press("space")
        assert not app.playing and 0 < app.index < 66
        await pilot.press(*["plus"] * 6)  # 8x: the rest in under half a second
        assert app.speed == 8.0 and app.notes[-1] == ("warning", "already the fastest: 8x")
        await pilot.press("space")
        for _ in range(300):
            await asyncio.sleep(0.01)
            if not app.playing:
                break
        assert not app.playing and app.index == 66  # played to the end, then stopped there and said so
        assert app.notes[-1][1].startswith("end of the recording")
        assert app.state == live_states(recording)[-1]


async def test_engine_keys_say_a_recording_cannot_be_changed_and_nothing_invites_typing(recording):
    app = NotingReplay(ReplaySession(read_recording(recording)))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert "no requests at this point of the recording" in app.query_one(RequestsTable).render().plain
        for _ in range(2):  # at the start, and while playing
            title = str(app.query_one(TitleBar).content)
            assert "replay of a recording" in title and "running" not in title and "paused" not in title
            assert not app.query_one(PromptBar).display
            await pilot.press("space")
        await pilot.press(*"bxc")  # letters that are no replay key do nothing
        assert not app.notes and not app.query_one(PromptBar).display
        await pilot.press("ctrl+b")
        assert app.notes[-1] == (
            "warning",
            "this is a replay of a recording: it shows what happened, nothing can be "
            "sent to it (enginetui opens a live engine)",
        )
        await pilot.press("t")
        assert not app.query_one(TimelinePanel).display


async def test_a_file_cut_short_opens_up_to_its_last_good_event_and_says_so(recording, tmp_path):
    data = open(recording, "rb").read()
    cut = tmp_path / "cut.etrec"
    cut.write_bytes(data[: len(data) * 2 // 3])
    session, notes = open_session(str(cut))
    assert 0 < len(session) < 67
    assert len(notes) == 1 and "the file is cut short at byte" in notes[0]
    assert notes[0].endswith(f"loaded the {len(session)} events before it")
    app = NotingReplay(session, notes=notes)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.notes[0] == ("warning", notes[0])
        await pilot.press("end")
        await pilot.pause()
        assert app.state == live_states(str(cut))[-1]


def test_the_command_refuses_what_it_cannot_read(recording, tmp_path, capsys):
    newer = tmp_path / "newer.etrec"
    data = bytearray(open(recording, "rb").read())
    data[8:10] = (99).to_bytes(2, "little")  # the preamble's format version
    newer.write_bytes(bytes(data))
    assert main(["replay", str(newer)]) == 2
    assert "recording of format version 99" in capsys.readouterr().err
    (tmp_path / "junk.etrec").write_bytes(b"not a recording")
    assert main(["replay", str(tmp_path / "junk.etrec")]) == 2
    assert "is not an enginetui recording" in capsys.readouterr().err
    assert main(["replay", str(recording), "--at", "999"]) == 2
    assert "--at: no step 999" in capsys.readouterr().err


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=lambda size: f"{size[0]}x{size[1]}")
def test_snapshot_of_the_replay_and_its_timeline(snap_compare, recording, size):
    """Step 34: r6 was preempted at step 27, waited, and is recomputing; the last lane (r6) selected."""

    async def jump_and_select(pilot) -> None:
        await pilot.press("g")
        await pilot.pause()
        await pilot.press("3", "4", "enter", "up")
        await pilot.pause()

    app = NotingReplay(ReplaySession(read_recording(recording)))
    assert snap_compare(app, terminal_size=size, run_before=jump_and_select)


def test_replay_shows_the_text_the_engine_returned(text_opt_dir, tmp_path):
    """A real engine's recording: prompts and outputs decoded with the recorded tokenizer, as returned live."""
    from enginetui.core import LLM, SamplingParams

    path = tmp_path / "real.etrec"
    llm = LLM(model=text_opt_dir, record=str(path), num_gpu_blocks_override=32)
    try:
        outs = llm.generate(["The river runs", "A class is"], SamplingParams(max_tokens=12, temperature=0))
    finally:
        llm.shutdown()
    session, notes = open_session(str(path))
    assert notes == []
    views = session.state_at(len(session) - 1).requests
    assert {k: (v.prompt, v.text, v.status) for k, v in views.items()} == {
        o.request_id: (o.prompt, o.outputs[0].text, "finished") for o in outs
    }
    assert all(v.ttft() > 0 for v in views.values())
