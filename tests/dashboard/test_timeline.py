"""The timeline's lanes for a hand-built run: chunked prefill, decode, a preemption and the
recompute after it, and every way a request ends, each aligned to its engine step."""

from textual.app import App

from enginetui import keys
from enginetui.core.engine.events import Admission, Preemption, PrefillChunk, RequestAdded, RequestEnd
from enginetui.core.sampling_params import SamplingParams
from enginetui.dashboard.state import DashboardState
from enginetui.dashboard.timeline import DECODE, PREFILL, RECOMPUTE, REQUEUED, STALLED, WAITING, Timeline
from enginetui.dashboard.widgets.prompt_bar import PromptBar
from enginetui.dashboard.widgets.timeline import TimelinePanel, lane_cells, ruler, visible_lanes
from tests.dashboard.builders import event, progress
from tests.dashboard.scenes import SIZE, advance, settle, start


def added(req_id: str, prompt: int) -> RequestAdded:
    return RequestAdded(req_id, list(range(prompt)), SamplingParams(max_tokens=8), 8, 0, 1000.0)


def scenario() -> list:
    """r1: a 40-token prompt chunked over steps 1-3 (16 + 16 + 8), then decoding, preempted at 6,
    waiting, re-admitted at 8 with a 2-step recompute, decoding, finished (length) at 11.
    r2: waits for steps 1-2, its prompt in one step at 3, decodes, is aborted between steps 5 and 6.
    r3: arrives between steps 6 and 7, is rejected at once."""
    r1 = lambda computed, tokens, **kw: progress("r1", computed, tokens, prompt=40, **kw)  # noqa: E731
    r2 = lambda computed, tokens, **kw: progress("r2", computed, tokens, prompt=4, **kw)  # noqa: E731
    return [
        event(0, kind="update", added=[added("r1", 40), added("r2", 4)], waiting=[r1(0, 40, status="waiting"),
              r2(0, 4, status="waiting")]),
        event(1, scheduled={"r1": 16}, admitted=[Admission("r1", 16, 0, False)], chunks=[PrefillChunk("r1", 16, 24)],
              running=[r1(16, 40)], waiting=[r2(0, 4, status="waiting")]),
        event(2, scheduled={"r1": 16}, chunks=[PrefillChunk("r1", 16, 8)], running=[r1(32, 40)],
              waiting=[r2(0, 4, status="waiting")]),
        event(3, scheduled={"r1": 8, "r2": 4}, admitted=[Admission("r2", 4, 0, False)],
              chunks=[PrefillChunk("r1", 8, 0)], new_tokens={"r1": [7], "r2": [9]}, running=[r1(40, 41), r2(4, 5)]),
        event(4, scheduled={"r1": 1, "r2": 1}, new_tokens={"r1": [7], "r2": [9]}, running=[r1(41, 42), r2(5, 6)]),
        event(5, scheduled={"r1": 1, "r2": 1}, new_tokens={"r1": [7], "r2": [9]}, running=[r1(42, 43), r2(6, 7)]),
        event(5, kind="update", seq=6, finished=[RequestEnd("r2", "abort", "aborted by the client", 3)],
              running=[r1(42, 43)]),
        event(6, seq=7, preempted=[Preemption("r1", 43, 3)], waiting=[r1(0, 43, status="preempted", preemptions=1)]),
        event(6, kind="update", seq=8, added=[added("r3", 900)],
              rejected=[RequestEnd("r3", "rejected", "prompt needs 57 blocks > pool 8", 0)],
              waiting=[r1(0, 43, status="preempted", preemptions=1)]),
        event(7, seq=9, waiting=[r1(0, 43, status="preempted", preemptions=1)]),
        event(8, seq=10, scheduled={"r1": 32}, admitted=[Admission("r1", 32, 0, True)],
              chunks=[PrefillChunk("r1", 32, 11)], running=[r1(32, 43, preemptions=1)]),
        event(9, seq=11, scheduled={"r1": 11}, chunks=[PrefillChunk("r1", 11, 0)], new_tokens={"r1": [7]},
              running=[r1(43, 44, preemptions=1)]),
        event(10, seq=12, scheduled={}, running=[r1(43, 44, preemptions=1)]),
        event(11, seq=13, scheduled={"r1": 1}, new_tokens={"r1": [7]},
              finished=[RequestEnd("r1", "length", "max_tokens reached", 8)]),
    ]  # fmt: skip


def folded() -> Timeline:
    timeline = Timeline()
    for e in scenario():
        timeline.apply(e)
    return timeline


def test_each_lane_holds_its_phases_step_by_step():
    t = folded()
    r1, r2, r3 = t.lanes["r1"], t.lanes["r2"], t.lanes["r3"]
    assert r1.segments == [
        (PREFILL, 1, 3),
        (DECODE, 4, 5),
        (REQUEUED, 7, 7),
        (RECOMPUTE, 8, 9),
        (STALLED, 10, 10),
        (DECODE, 11, 11),
    ]
    assert r1.preemptions == [6] and r1.end == (12, "length") and r1.num_chunks == 5  # 3 prefill + 2 recompute
    assert [r1.phase_at(s) for s in (1, 3, 4, 6, 7, 8, 9, 12)] == [
        PREFILL,
        PREFILL,
        DECODE,
        None,
        REQUEUED,
        RECOMPUTE,
        RECOMPUTE,
        None,
    ]
    assert r2.first_step == 1 and r2.segments == [(WAITING, 1, 2), (PREFILL, 3, 3), (DECODE, 4, 5)]
    assert r2.end == (6, "abort")  # aborted after step 5: it did not run in step 6
    assert r3.first_step == 7 and r3.segments == [] and r3.end == (7, "rejected")
    assert t.last_step == 11 and list(t.lanes) == ["r1", "r2", "r3"]


def test_cells_draw_chunks_preemption_recompute_and_ends_in_step_columns():
    t = folded()
    glyphs = {k: "".join(c[0] if c else " " for c in lane_cells(lane, 1, 12)) for k, lane in t.lanes.items()}
    assert glyphs == {
        "r1": "███━━✖·██┄━⊣",
        "r2": "··█━━✗      ",
        "r3": "      ⊘     ",
    }
    recompute = lane_cells(t.lanes["r1"], 8, 8)[0]
    assert recompute[1] == "#d19a66"  # recompute is told apart from the first prefill by its colour


def test_the_window_shows_the_newest_overlapping_lanes_and_keeps_the_selected_one():
    t = folded()
    assert [lane.req_id for lane in visible_lanes(t, 1, 12, 5, None)] == ["r1", "r2", "r3"]
    assert [lane.req_id for lane in visible_lanes(t, 7, 12, 5, None)] == ["r1", "r3"]  # r2 ended before step 7
    assert [lane.req_id for lane in visible_lanes(t, 1, 12, 2, None)] == ["r2", "r3"]
    assert [lane.req_id for lane in visible_lanes(t, 1, 12, 2, "r1")] == ["r1", "r3"]
    assert ruler(8, 14).plain == "  |10" + " " * 9  # |20 would not fit


def test_the_dashboard_state_folds_the_timeline_and_clones_independently():
    state = DashboardState()
    events = scenario()
    for e in events[:8]:
        state.apply_event(e)
    copy = state.clone()
    assert copy == state and copy.timeline == state.timeline
    for e in events[8:]:
        state.apply_event(e)
    assert copy.timeline.lanes["r1"].end is None and state.timeline.lanes["r1"].end == (12, "length")
    assert "r3" not in copy.timeline.lanes and copy.requests["r1"].status == "preempted"
    fresh = DashboardState()
    for e in events[:8]:
        fresh.apply_event(e)
    assert copy == fresh  # the copy is still exactly the state after those events


async def test_t_shows_the_live_timeline_following_the_engine_step_by_step(make_app):
    app = make_app(autostep=False)
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        panel = app.query_one(TimelinePanel)
        assert not panel.display  # live, it waits to be asked for
        await pilot.press("ctrl+t")
        assert panel.display
        assert "no requests yet" in panel.render().plain
        for prompt in ("one two three", "four five six"):
            app.submit(prompt, app.query_one(PromptBar).settings)
        await settle(pilot, lambda: app.state.listed == {"r1", "r2"})  # both waiting in the engine
        await advance(pilot, 4)
        assert app.selected == "r1"  # the first prompt sent is followed
        app.redraw()
        lines = [line.rstrip() for line in panel.render().plain.splitlines()]
        assert panel.border_title == "Timeline · steps 1–4 · ^t hides"
        assert lines[1] == "▶ r1 █━━━" and lines[2] == "  r2 █━━━"  # prompts in step 1, then a token a step
        await advance(pilot, 2)
        app.redraw()
        assert panel.render().plain.splitlines()[1].rstrip() == "▶ r1 █━━━━━"
        assert lines[-1].split() == ["█", "prefill", "━", "decode"]  # the legend: the cells on show
        await pilot.press("ctrl+t")
        assert not panel.display


async def test_the_timeline_names_the_key_its_app_hides_it_with():
    """^t where the prompt box takes letters; t where nothing is typed (a replay, `simulate --watch`)."""
    state = DashboardState()
    for e in scenario():
        state.apply_event(e)
    for binding, key in ((keys.timeline_key(), "^t"), (keys.timeline_key(plain=True), "t")):
        app = TimelineApp()
        app.BINDINGS = [binding]
        async with app.run_test(size=SIZE) as pilot:
            panel = app.query_one(TimelinePanel)
            panel.show(state.timeline, {}, None)
            await pilot.pause()
            assert panel.border_title.endswith(f" · {key} hides")


class TimelineApp(App):
    def compose(self):
        yield TimelinePanel()
