"""`enginetui simulate --watch`: a tiny simulated run followed live in the dashboard, to its last step."""

import asyncio

import pytest

from enginetui.dashboard.widgets.help_screen import HelpScreen
from enginetui.dashboard.widgets.requests_table import RequestsTable
from enginetui.dashboard.widgets.timeline import TimelinePanel
from enginetui.dashboard.widgets.title_bar import TitleBar
from enginetui.keys import SELECT_HINT
from enginetui.simulate.api import simulate
from enginetui.simulate.watch import SIMULATED_ONLY, LiveSimulation, SimulatedEngine, SimWatchTUI

RUN = dict(
    model="opt-125m",
    hardware="h100",
    dataset="random",
    num_prompts=6,
    input_len=48,
    output_len=5,
    request_rate=float("inf"),
    num_gpu_blocks_override=64,
    max_num_seqs=4,
)


def shown(app, widget_type) -> str:
    widget = app.query_one(widget_type)
    rendered = widget.render()
    return getattr(rendered, "plain", None) or str(getattr(widget, "content", rendered))


async def until(pilot, done, timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not done():
        assert loop.time() < deadline, "the watched run did not get there"
        await pilot.pause(0.02)


@pytest.mark.parametrize("speed", [0.0, 50.0])
async def test_watch_shows_the_simulated_run_to_its_last_step(speed):
    expected = simulate(**RUN)  # the same run, not watched: what the dashboard must end on
    steps = len(expected.run.timeline.end)
    live = LiveSimulation(lambda sink: simulate(live=sink, **RUN))
    engine = SimulatedEngine(live, speed, "opt-125m")
    live.start()
    app = SimWatchTUI(engine, history_interval=0.1)
    async with app.run_test(size=(140, 40)) as pilot:
        await until(pilot, lambda: engine.finished and "finished" in shown(app, TitleBar))
        title = shown(app, TitleBar)
        assert "simulated roofline" in title and f"step {steps}" in title and "running" not in title
        assert ("as fast as drawn" if speed == 0 else "50x") in title
        assert app.state.step == steps
        table = shown(app, RequestsTable)
        assert table.count("FINISHED") == RUN["num_prompts"]
        assert all(v.num_output_tokens == RUN["output_len"] for v in app.state.requests.values())
        assert app.state.latest.time == pytest.approx(expected.run.timeline.end[-1])
    live.join(timeout=5)
    assert live.result.summary.num_completed == expected.summary.num_completed


def test_speed_must_not_be_negative():
    with pytest.raises(ValueError, match="--speed"):
        SimulatedEngine(LiveSimulation(lambda sink: None), -1.0, "opt-125m")


async def test_its_keys_work_with_no_prompt_box_to_take_them():
    """q, t and ? act (a hidden prompt box once had the focus and took them as text); ^x says why it
    does nothing."""
    live = LiveSimulation(lambda sink: simulate(live=sink, **RUN))
    engine = SimulatedEngine(live, 0.0, "opt-125m")
    live.start()
    app = SimWatchTUI(engine, history_interval=0.1)
    async with app.run_test(size=(140, 40)) as pilot:
        await until(pilot, lambda: engine.finished and "finished" in shown(app, TitleBar))
        assert app.focused is None
        assert app.query_one(RequestsTable).border_subtitle == SELECT_HINT  # no abort or clear to name
        await pilot.press("ctrl+x")
        await until(pilot, lambda: any(n.message == SIMULATED_ONLY for n in app._notifications))
        timeline = app.query_one(TimelinePanel)
        shown_before = timeline.display
        await pilot.press("t")
        await until(pilot, lambda: timeline.display != shown_before)
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, HelpScreen))
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running)
    live.join(timeout=5)
