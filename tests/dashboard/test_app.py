"""The dashboard driven through Pilot against the real engine with the scripted model runner
(tests/fakes/scripted_engine.py): by hand (paused, stepped) or running freely."""

import asyncio
import re

import msgspec
import pytest
from textual import events

from enginetui.dashboard.app import EngineTUI
from enginetui.dashboard.widgets.event_log import EventLog
from enginetui.dashboard.widgets.help_screen import HelpScreen
from enginetui.dashboard.widgets.model_panel import ModelPanel
from enginetui.dashboard.widgets.palette import request_color
from enginetui.dashboard.widgets.pool_grid import PoolGrid
from enginetui.dashboard.widgets.prompt_bar import PromptBar
from enginetui.dashboard.widgets.requests_table import RequestsTable, one_line
from enginetui.dashboard.widgets.sparklines import Sparklines
from enginetui.dashboard.widgets.step_panel import StepPanel
from enginetui.dashboard.widgets.title_bar import TitleBar
from enginetui.flags.engine import DASHBOARD_POOL_RULE
from enginetui.settings import SamplingSettings
from tests.dashboard.builders import event
from tests.dashboard.scenes import PROMPTS, SIZE, RecordingApp, advance, settle, start, submit
from tests.fakes.scripted_engine import ScriptedEngine


def shown(app: EngineTUI, widget_type) -> str:
    """What a panel shows right now, as plain text."""
    widget = app.query_one(widget_type)
    rendered = widget.render()
    return getattr(rendered, "plain", None) or str(getattr(widget, "content", rendered))


def cells_in(text, color: str) -> int:
    """How many grid cells of the rendered pool are drawn in `color`."""
    runs = (text.plain[span.start : span.end] for span in text.spans if color in str(span.style))
    return sum(len(run.replace(" ", "").replace("\n", "")) for run in runs)


async def enter_line(pilot, text: str) -> None:
    """Fill the prompt box (it has the focus) with `text` (faster than a key per character), press Enter."""
    pilot.app.query_one("#prompt").value = text
    await pilot.press("enter")


async def test_typed_prompt_streams_text_into_the_requests_panel(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        app.query_one(PromptBar).settings = SamplingSettings(max_tokens=500)  # still streaming when looked at,
        await pilot.press("pagedown", "pagedown")  # at 100 ms a step, however loaded the machine
        await settle(pilot, lambda: app.state.step_interval_ms == 100)
        await pilot.press(*"tell me about the river", "enter")
        seen = []
        for words in (3, 12):  # the redraw timer, not a direct redraw, brings it on screen
            await settle(pilot, lambda words=words: len(app.state.requests["r1"].text.split()) >= words)
            await asyncio.sleep(0.15)
            row = next(line for line in shown(app, RequestsTable).splitlines() if " r1 " in line)
            match = re.search(r" r1 +RUNNING +\d+/\d+  (.*)$", row)
            assert match, f"not a running row: {row!r}"
            note = match.group(1)  # the text column
            seen.append(note.removeprefix("…").strip())
        assert seen[0] != seen[1]
        assert all(len(part) > 5 and part in one_line(app.state.requests["r1"].text) for part in seen)
        assert app.state.requests["r1"].prompt == "tell me about the river\n"  # a typed prompt ends its line
        assert app.selected == "r1"


async def test_pause_then_s_moves_the_step_counter_by_exactly_one(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        app.submit("keep going for a while", SamplingSettings(max_tokens=500))
        await settle(pilot, lambda: app.state.step >= 3)
        await pilot.press("ctrl+p")
        await settle(pilot, lambda: app.state.paused)
        paused_at = app.state.step
        await asyncio.sleep(0.1)
        assert app.state.step == paused_at  # paused: no steps
        assert "⏸ paused" in shown(app, TitleBar)
        await pilot.press("ctrl+s")
        await settle(pilot, lambda: app.state.step > paused_at)
        await asyncio.sleep(0.1)
        await settle(pilot)
        assert app.state.step == paused_at + 1
        assert f"step {paused_at + 1}" in shown(app, TitleBar)
        await pilot.press("ctrl+p")
        await settle(pilot, lambda: app.state.step > paused_at + 2)
        assert "▶ running" in shown(app, TitleBar)


async def test_minus_and_plus_step_slow_motion_through_its_levels(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        assert "ms/step" not in shown(app, TitleBar)
        await pilot.press("pageup")
        await settle(pilot)
        assert ("warning", "already at full speed") in app.notes
        await pilot.press("pagedown")
        await settle(pilot, lambda: app.state.step_interval_ms == 50)
        await pilot.press("pagedown")
        await settle(pilot, lambda: app.state.step_interval_ms == 100)
        assert app.engine.step_interval == 0.1
        await asyncio.sleep(0.1)
        assert "▶ running · step 0 · 100 ms/step" in shown(app, TitleBar)
        app.submit("slowly now", app.query_one(PromptBar).settings)
        await settle(pilot, lambda: app.state.step >= 2)
        first = app.state.step
        await asyncio.sleep(0.35)
        assert app.state.step - first <= 4  # at most one step per 100 ms (the engine steps every 10 ms at full speed)
        await pilot.press("pageup")
        await settle(pilot, lambda: app.state.step_interval_ms == 50)
        for _ in range(6):
            await pilot.press("pagedown")
        await settle(pilot, lambda: app.state.step_interval_ms == 2000)
        assert ("warning", "already the slowest: 2000 ms per step") in app.notes


async def test_step_interval_given_at_start_up_is_applied_before_the_first_snapshot():
    app = RecordingApp(ScriptedEngine(autostep=False), step_interval_ms=250)
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        assert app.engine.step_interval == 0.25
        await asyncio.sleep(0.1)
        assert "· 250 ms/step ·" in shown(app, TitleBar)


async def test_s_while_running_only_explains(make_app):
    app = make_app()  # running, with nothing to do
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert app.state.step == 0
        assert any("press ^p to pause first" in note for _, note in app.notes)


async def test_pool_grid_shows_a_requests_blocks_while_it_runs_and_frees_them(make_app):
    app = make_app(autostep=False, num_blocks=32)
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        prompt = " ".join(["word"] * 40)  # 40 tokens + 8 generated: 3 blocks of 16
        app.submit(prompt, SamplingSettings(max_tokens=8))
        await advance(pilot, 2)
        grid = app.query_one(PoolGrid)
        view = app.state.requests["r1"]
        assert len(view.block_ids) == 3
        color = request_color(view.index)
        assert cells_in(grid.render(), color) == 3
        assert "KV pool · 3/32 used" in str(grid.border_title)
        while app.state.requests["r1"].active:
            await advance(pilot, 1)
        text = grid.render()
        assert cells_in(text, color) == 0
        cells, legend = text.plain.rsplit("\n", 1)
        assert cells.count("▫") == 3 and legend == "▫ freed  · free"  # freed this step, and said what ▫ means
        assert "KV pool · 0/32 used" in str(grid.border_title)


async def test_burst_into_a_tiny_pool_preempts(make_app):
    app = make_app(autostep=False, num_blocks=24, token_budget=48)
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        await pilot.press("ctrl+b")
        await settle(pilot, lambda: len(app.state.requests) == 8)
        while not any(line.kind == "preempt" for line in app.state.log):
            await advance(pilot, 1)
        assert "preempt" in shown(app, EventLog) and "lost" in shown(app, EventLog)
        assert any(v.status == "preempted" for v in app.state.ordered())
        assert "PREEMPTED" in shown(app, RequestsTable)
        await settle(pilot)
        count = app.fake.total_preemptions
        assert (
            count >= 1
            and str(app.query_one(EventLog).border_title)
            == f"Event log · {count} preemption{'s' if count > 1 else ''} so far"
        )


async def test_abort_the_selected_request(make_app):
    app = make_app(autostep=False)
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        for text in ("first prompt", "second prompt"):
            app.submit(text, app.query_one(PromptBar).settings)
        await advance(pilot, 2)
        await pilot.press("down")
        assert app.selected == "r2"
        await pilot.press("ctrl+x")
        await settle(pilot, lambda: app.state.requests["r2"].status == "aborted")
        assert app.state.requests["r1"].status == "running"
        assert "ABORTED" in shown(app, RequestsTable)
        await pilot.press("ctrl+x")
        await settle(pilot)
        assert any("r2 is already aborted" in note for _, note in app.notes)


async def test_a_new_request_is_selected_when_the_selected_one_has_ended(make_app):
    app = make_app(autostep=False)
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        app.submit("first prompt", app.query_one(PromptBar).settings)
        app.submit("second prompt", app.query_one(PromptBar).settings)
        assert app.selected == "r1"  # a live selection stays
        await advance(pilot, 1)
        await pilot.press("ctrl+x")
        await settle(pilot, lambda: app.state.requests["r1"].status == "aborted")
        await pilot.press("ctrl+b")
        await settle(pilot)
        assert app.selected == "r3"  # the first of the burst


async def test_set_and_burst_commands_in_the_prompt_box(make_app):
    app = make_app(autostep=False)
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        await enter_line(pilot, "/set temp 0.3")
        await enter_line(pilot, "/set max 5")
        bar = app.query_one(PromptBar)
        assert (bar.settings.temperature, bar.settings.max_tokens) == (0.3, 5)
        assert "max 5 · temp 0.3" in str(bar.query_one("#settings").content)
        await enter_line(pilot, "/set temp hot")
        assert ("error", "temperature needs a number, got 'hot'") in app.notes
        await enter_line(pilot, "/burst 3")
        await enter_line(pilot, "a typed prompt")
        await settle(pilot)
        params = app.fake.params
        burst, typed = [params[f"r{i}"] for i in (1, 2, 3)], params["r4"]
        # bursts fill the pool: past EOS, 32-128 tokens each; the rest of the settings bar applies
        assert all(p.ignore_eos and 32 <= p.max_tokens <= 128 and p.temperature == 0.3 for p in burst)
        assert len({p.max_tokens for p in burst}) > 1
        assert (typed.max_tokens, typed.ignore_eos, typed.temperature) == (5, False, 0.3)  # typed: the bar's values
        await enter_line(pilot, "/frobnicate")
        assert any("unknown command /frobnicate" in note for _, note in app.notes)
        await enter_line(pilot, "/help")
        assert isinstance(app.screen, HelpScreen)


async def test_bursts_are_seeded(make_app):
    lengths = []
    for _ in range(2):
        app = make_app(autostep=False)
        async with app.run_test(size=SIZE) as pilot:
            await start(pilot)
            await pilot.press("ctrl+b")
            await settle(pilot, lambda app=app: len(app.state.requests) == 8)
            lengths.append([(v.prompt, v.max_tokens) for v in app.state.ordered()])
    assert lengths[0] == lengths[1]


async def test_rejected_prompts_are_explained_not_raised(make_app):
    app = make_app(autostep=False, num_blocks=4, max_model_len=200)
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        app.submit(" ".join(["w"] * 300), app.query_one(PromptBar).settings)  # over max_model_len
        app.submit(" ".join(["w"] * 100), app.query_one(PromptBar).settings)  # never fits 4 blocks
        await settle(pilot, lambda: app.state.requests["r1"].status == "rejected")
        await advance(pilot, 1)
        await settle(pilot, lambda: app.state.requests["r2"].status == "rejected")
        assert (
            "error",
            "r1 rejected: prompt is 301 tokens; max_model_len is 200 (room for at least one output token is needed)",
        ) in app.notes  # refused by the client (AsyncLLM's processor)
        # rejected by the engine's scheduler (it reserves the whole sequence: vLLM's rule)
        assert app.state.requests["r2"].detail == (
            "needs 11 KV blocks for 164 tokens (prompt + max_tokens - 1) but the whole pool has 4"
        )
        log = shown(app, EventLog)
        assert "reject  r1 · prompt is 301 tokens" in log and "reject  r2 · needs 11 KV blocks" in log, log


async def test_engine_death_is_a_message_not_a_traceback(make_app):
    app = make_app(autostep=False)
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        app.submit("hello", app.query_one(PromptBar).settings)
        await advance(pilot, 1)
        app.fake.die()
        await settle(pilot, lambda: app.phase == "stopped")
        assert "✖ engine stopped" in shown(app, TitleBar)
        assert app.state.requests["r1"].status == "error"
        assert (
            "error",
            "EngineCore thread died unexpectedly (exit code 0)",
        ) in app.notes  # no reopen: no restart offered
        assert "restart" not in footer_actions(app)
        # The engine's keys stay in the footer, dimmed, and do nothing; the rest still work.
        assert set(footer_actions(app)) == {"submit", "help", "quit"}
        dimmed = {b.action for _, b, enabled, _ in app.screen.active_bindings.values() if b.show and not enabled}
        assert dimmed == {"pause", "step", "burst", "pace(1)", "pace(-1)"}
        await pilot.press("ctrl+b")
        assert len(app.state.requests) == 1  # no burst
        await pilot.press(*"hi", "enter")
        assert ("error", "the engine is not running") in app.notes


async def test_r_restarts_a_dead_engine_with_the_request_history_kept():
    engines = [ScriptedEngine(), ScriptedEngine()]
    reopened = iter(engines[1:])
    app = RecordingApp(engines[0], reopen=lambda: next(reopened), step_interval_ms=50)
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        assert "restart" not in footer_actions(app)  # nothing to restart while it runs
        await pilot.press("ctrl+r")  # does nothing while the engine runs
        assert app.phase == "ready" and app.engine is engines[0]
        app.submit("first words", SamplingSettings(max_tokens=500))
        await settle(pilot, lambda: app.state.step >= 40)  # the new engine's event counter starts far behind
        engines[0].die()  # while the prompt box has the focus
        await settle(pilot, lambda: app.phase == "stopped")
        await pilot.pause(0.1)
        assert "✖ engine stopped · ^r restarts · step" in shown(app, TitleBar)
        assert ("error", "EngineCore thread died unexpectedly (exit code 0) · ^r starts it again") in app.notes
        assert app.focused is app.query_one("#prompt")  # typing still types
        assert "restart" in footer_actions(app)
        assert app.state.requests["r1"].status == "error"
        await pilot.press("ctrl+r")
        await settle(pilot, lambda: app.phase == "ready")
        assert app.engine is engines[1] and engines[0].shutdown_called
        assert engines[1].step_interval == 0.05  # the same slow motion as before
        assert "restart" not in footer_actions(app)
        await pilot.press(*"tell", "space", *"me", "space", *"more", "enter")
        await settle(pilot, lambda: len(app.state.requests.get("r2", app.state.requests["r1"]).text.split()) >= 3)
        assert list(app.state.requests) == ["r1", "r2"]  # the history stays; new ids go on from it
        assert [r.req_id for r in app.state.latest.running] == ["r2"]  # the new engine's state, not the dead one's
        assert app.state.requests["r1"].status == "error" and app.state.requests["r2"].active
        assert "▶ running" in shown(app, TitleBar)
        await pilot.press("ctrl+q")
    assert engines[1].shutdown_called


async def test_the_model_panel_shows_the_engines_facts_at_80x24_and_a_restarted_engines():
    engines = [ScriptedEngine(autostep=False), ScriptedEngine(autostep=False, num_blocks=32, block_size=8)]
    reopened = iter(engines[1:])
    app = RecordingApp(engines[0], reopen=lambda: next(reopened), random_weights=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await start(pilot)
        panel = app.query_one(ModelPanel)
        # The right column is 36 cells wide inside its frames: facts wrap whole, none is cut.
        assert shown(app, ModelPanel).splitlines() == [  # the embedded model's facts
            "OPTForCausalLM · 1.38M params",
            "random weights · float32",
            "context 512 tok · KV 4.0 KiB/tok",
            "pool 1,024 tok = 4.0 MiB",  # 64 blocks × 16 tokens, × 4 KiB
            "sized by --num-gpu-blocks-override",
        ]
        assert panel.outer_size.height == 5 + 2  # all its lines, and its frame
        engines[0].die()
        await settle(pilot, lambda: app.phase == "stopped")
        await pilot.press("ctrl+r")
        await settle(pilot, lambda: app.phase == "ready")
        await pilot.pause(0.1)
        assert shown(app, ModelPanel).splitlines()[-2] == "pool 256 tok = 1.0 MiB"  # 32 blocks × 8 tokens
        await pilot.press("ctrl+q")


async def test_the_first_screen_says_what_the_embedded_model_is_offers_slow_motion_and_who_sized_the_pool():
    app = RecordingApp(ScriptedEngine(autostep=False), pool_rule=DASHBOARD_POOL_RULE)  # as `enginetui` with no flag
    async with app.run_test(size=(80, 24)) as pilot:
        await start(pilot)
        lines = shown(app, RequestsTable).splitlines()
        assert lines[:3] == [
            "no requests yet: just type a prompt",
            "and press Enter · ^b sends a burst",
            "· PgDn slow motion: watch each step",
        ]
        assert lines[4:7] == [
            "the model: a tiny OPT (1.38M params)",
            "trained on Python's docs: its text",
            "looks plausible but is not sensible",
        ]
        assert max(map(len, lines[:7])) <= app.query_one(RequestsTable).content_size.width  # nothing cut in 80 columns
        assert shown(app, ModelPanel).splitlines()[-1] == "sized by the dashboard's default"
        await pilot.press("ctrl+q")


async def test_the_model_panel_says_when_the_engine_did_not_describe_its_model():
    engine = ScriptedEngine(autostep=False)
    engine.info = None  # an engine known from its events only (the benchmark's watching dashboard)
    app = RecordingApp(engine)
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        assert shown(app, ModelPanel) == "not known"
        await pilot.press("ctrl+q")


async def test_every_panel_shows_the_moment_of_the_last_redraw_until_the_next():
    """Events folded between two redraws reach the screen together: a panel repainted in between
    (a resize, a hover) draws what it was last shown, never a newer state beside older panels."""
    app = RecordingApp(ScriptedEngine(autostep=False), redraw_hz=0.01, history_interval=0.1)  # redraws: ours only
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        submit(app, PROMPTS[:2])
        await advance(pilot, 6)  # redraws after each step
        panels = (TitleBar, RequestsTable, EventLog, Sparklines, StepPanel)
        drawn = {panel: shown(app, panel) for panel in panels}
        step = app.state.step
        for _ in range(4):
            await app.engine.step_once()
        while app.state.step < step + 4 or not app.engine.drained():
            await pilot.pause(0.01)
        assert app.state.requests["r1"].num_output_tokens > 6  # the state moved on
        assert {panel: shown(app, panel) for panel in panels} == drawn
        app.redraw()
        assert shown(app, RequestsTable) != drawn[RequestsTable] and f"step {step + 4}" in shown(app, TitleBar)
        await pilot.press("ctrl+q")


class Gate:
    """A pacer the test opens and shuts."""

    max_cpu_share = 0.08  # as a budget would be

    def __init__(self) -> None:
        self.open = False  # may timer redraws run
        self.asked = 0  # how often the redraw timer asked

    def may_draw(self) -> bool:
        self.asked += 1
        return self.open


async def test_the_redraw_timer_waits_for_the_cpu_budget_and_keys_do_not():
    app = RecordingApp(ScriptedEngine(autostep=False), redraw_hz=50)
    # The sparklines' idle clock closes an interval every 0.5 s of idle time, a real change of state
    # that the timer then asks to draw: off here, so "nothing new" below holds whenever its tick lands.
    app._sample_idle_time = lambda: None
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        app.pacer = gate = Gate()
        submit(app, PROMPTS[:1])
        step = app.state.step
        await app.engine.step_once()
        while app.state.step == step or not app.engine.drained():
            await pilot.pause(0.01)
        await pilot.pause(0.1)  # five timer ticks
        assert gate.asked > 0 and f"step {step + 1}" not in shown(app, TitleBar)  # held back
        gate.open = True
        await pilot.pause(0.1)
        assert f"step {step + 1}" in shown(app, TitleBar)  # the next allowed tick draws the latest state
        gate.open, asked = False, gate.asked
        await pilot.press("down")  # a key redraws at once, whatever the budget says
        assert app.selected is not None and f"▶ {app.selected}" in shown(app, RequestsTable)
        await pilot.pause(0.1)
        assert gate.asked == asked  # nothing new to draw: the timer did not even ask
        await pilot.press("ctrl+q")


async def test_help_lists_every_key(make_app):
    app = make_app(autostep=False)
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        await pilot.press("f1")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        listed = {key for key, _ in app.screen.keys}
        assert {"type", "^p", "^s", "^x", "^b", "^l", "PgDn", "PgUp", "↑", "↓", "^t", "F1", "^q"} <= listed
        panels = dict(app.screen.panels)
        for title in (
            "Requests",
            "Queues",
            "Selected request",
            "Model",
            "KV pool",
            "Step",
            "Over time",
            "Event log",
            "Timeline",
        ):
            assert title in panels and "\n" not in panels[title]
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("f1", "ctrl+c")  # ctrl+c quits from the help screen too
    assert app.fake.shutdown_called


async def test_help_and_the_empty_requests_panel_tell_where_the_engine_log_is():
    app = RecordingApp(ScriptedEngine(autostep=False, num_blocks=48), log_file="/var/tmp/enginetui/engine-7.log")
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        assert not app.notes  # no start-up toast over the prompt and settings bars
        assert "engine output (F1 shows it again):\n/var/tmp/enginetui/engine-7.log" in shown(app, RequestsTable)
        await pilot.press("f1")
        await settle(pilot)
        about = dict(app.screen.about)
        assert about["KV pool"] == (
            "48 blocks × 16 tok · dashboard default 512 blocks so pages are visible; "
            "pass --num-gpu-blocks-override N to change it"
        )
        assert (
            about["engine log"] == "/var/tmp/enginetui/engine-7.log · EngineCore's stdout, stderr, logging and warnings"
        )


async def test_help_names_the_server_beside_the_dashboard():
    app = RecordingApp(ScriptedEngine(autostep=False), serving="http://127.0.0.1:8000")
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        await pilot.press("f1")
        await settle(pilot)
        assert dict(app.screen.about)["server"] == (
            "http://127.0.0.1:8000, this engine over the OpenAI API (others: `enginetui attach http://127.0.0.1:8000`)"
        )
    assert "server" not in dict(RecordingApp(ScriptedEngine(autostep=False)).about())


async def test_help_says_how_many_engine_logs_are_kept_in_the_cache_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    app = RecordingApp(ScriptedEngine(autostep=False), log_file=str(tmp_path / "enginetui" / "engine-7.log"))
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        assert dict(app.about())["engine log"].endswith("logging and warnings (the last 20 logs there are kept)")


async def test_c_clears_ended_requests_and_a_click_selects_a_row(make_app):
    app = make_app(autostep=False)
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        for text in ("first prompt", "second prompt", "third prompt"):
            app.submit(text, app.query_one(PromptBar).settings)
        await advance(pilot, 1)
        await pilot.press("down", "ctrl+x")  # abort r2
        await settle(pilot, lambda: app.state.requests["r2"].status == "aborted")
        await pilot.press("ctrl+l")
        await settle(pilot)
        assert list(app.state.requests) == ["r1", "r3"] and app.selected == "r1"
        assert " r2 " not in shown(app, RequestsTable)
        await pilot.click(RequestsTable, offset=(6, 2))  # border row, then r1, r3: the second row
        assert app.selected == "r3"
        await pilot.press("ctrl+l")
        assert ("warning", "no ended requests to clear") in app.notes


async def test_q_quits_and_shuts_the_engine_down(make_app):
    app = make_app(autostep=False)
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        await pilot.press("ctrl+q")
    assert app.fake.shutdown_called
    assert app.return_code == 0


async def test_ctrl_c_quits_even_from_the_prompt_box(make_app):
    app = make_app(autostep=False)
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        await pilot.press("h", "ctrl+c")
    assert app.fake.shutdown_called


async def test_step_panel_shows_the_prefix_cache_hit_rate(make_app):
    app = make_app(autostep=False)
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        await settle(pilot)  # the engine's own events are in: this one is the latest
        app.state.apply_event(
            msgspec.structs.replace(
                event(1, seq=app.state.latest.seq + 1), prefix_cache_queries=200, prefix_cache_hits=90
            )
        )
        app.redraw()
        assert "prefix hits 45%" in shown(app, StepPanel)


async def test_step_panel_says_when_a_step_ran_on_fewer_threads_than_the_engine_has(make_app):
    app = make_app(autostep=False)
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        await settle(pilot)
        assert "thread" not in shown(app, StepPanel)  # the scripted runner runs no model on a CPU
        app.fake.info = msgspec.structs.replace(app.fake.info, cpu_threads=4)
        for threads, words in ((4, "· 4 threads"), (1, "· 1 of 4 threads")):  # all of them, then the governor's one
            app.state.apply_event(
                msgspec.structs.replace(event(1, seq=app.state.latest.seq + 1), compute_threads=threads)
            )
            app.redraw()
            assert words in shown(app, StepPanel)
        # asynchronous scheduling adds the placeholders to the same line: the threads give way, never wrap it
        app.state.apply_event(
            msgspec.structs.replace(event(1, seq=app.state.latest.seq + 1), compute_threads=1, async_scheduling=True)
        )
        app.redraw()
        width = app.query_one(StepPanel).content_size.width
        assert "placeholders 0" in shown(app, StepPanel)
        assert all(len(line) <= width for line in shown(app, StepPanel).splitlines())


def footer_actions(app: EngineTUI) -> list[str]:
    """The actions the footer offers right now, in its order."""
    return [
        b.action.removeprefix("app.").split("(")[0]
        for _, b, enabled, _ in app.screen.active_bindings.values()
        if b.show and enabled
    ]  # ^x and ^l are on the requests panel's frame instead


async def test_a_slash_command_is_typed_like_any_text(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        await pilot.press(*"/burst", "space", "1", "6")
        assert app.query_one("#prompt").value == "/burst 16"
        assert not app.state.requests and not app.engine.paused
        await pilot.press("enter")
        await settle(pilot, lambda: len(app.state.requests) == 16)


async def test_the_footer_shows_only_the_keys_that_apply(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        dashboard = footer_actions(app)
        assert set(dashboard) == {"pause", "step", "burst", "pace", "submit", "help", "quit"}
        await pilot.press("f1")
        await settle(pilot)
        assert set(footer_actions(app)) == {
            "close"
        }  # over the help screen: its own key (Esc, F1; typing closes it too)
        await pilot.press("escape")
        await settle(pilot)
        assert footer_actions(app) == dashboard
        await pilot.press("ctrl+p")
        await settle(pilot, lambda: app.state.paused)
        assert "resume" in footer_actions(app) and "pause" not in footer_actions(app)


async def test_each_pace_key_counts_from_the_last_pace_asked_for_while_the_engine_is_busy(make_app):
    app = make_app(control_delay=0.2)  # each change takes 0.2 s to reach the engine
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        await pilot.press("pagedown", "pagedown", "pagedown", "pagedown")  # 50, 100, 250, 500
        await settle(pilot, lambda: app.state.step_interval_ms == 500 and not app._paces_pending)
        await pilot.press("pageup", "pageup", "pageup")  # 250, 100, 50
        await settle(pilot, lambda: app.state.step_interval_ms == 50 and not app._paces_pending)
        await pilot.press("pagedown")
        await settle(pilot, lambda: app.state.step_interval_ms == 100 and not app._paces_pending)
        assert app.engine.step_interval == 0.1


def screen_lines(app: EngineTUI) -> list[str]:
    """The whole screen as plain text lines, as the terminal would show it."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 48)], ids=lambda size: f"{size[0]}x{size[1]}")
async def test_the_essentials_show_at_every_designed_size(size):
    engine = ScriptedEngine(autostep=False, num_blocks=24, token_budget=48)
    engine.model_name = "facebook/opt-125m"  # a long name: the title cuts it, never the state
    app = RecordingApp(engine, random_weights=True)
    async with app.run_test(size=size) as pilot:
        await start(pilot)
        await pilot.press("ctrl+b")
        await settle(pilot, lambda: len(app.state.requests) == 8)
        await advance(pilot, 12)  # paused, as a hand-stepped engine is
        for _ in range(6):
            await pilot.press("pagedown")
        await settle(pilot, lambda: app.state.step_interval_ms == 2000)
        app.selected = "r3"
        await settle(pilot)
        lines = screen_lines(app)
        screen = "\n".join(lines)
        assert lines[0].startswith(" enginetui ⏸ paused · step 12 · 2000 ms/step · facebook/opt")
        view = app.state.requests["r3"]
        queues = app.state.latest
        for essential in (
            "budget ",
            "KV pool · ",
            f"running {len(queues.running)}/8",
            f"waiting {len(queues.waiting)}",
            f"r3 · {view.status}",
            f"{view.status.upper()} · {view.num_computed_tokens}/{view.num_tokens} tok",
            "^p Resume",
            "F1 Help",
            "^q Quit",
            "OPTForCausalLM · 1.38M params",
            "random weights",
        ):
            assert essential in screen, f"{essential!r} is not on the {size[0]}x{size[1]} screen:\n{screen}"
        wide = size[0] >= 120
        assert ("random weights" in lines[0]) == wide  # the whole title only when wide (the model panel: always)
        assert ("Event log" in screen) == (size[1] >= 30)  # short terminals drop the log and sparklines


async def test_a_request_shows_as_sent_then_queued_with_its_prompt_length(make_app):
    app = make_app(autostep=False)
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)

        def row() -> str:
            app.redraw()
            return next(line for line in shown(app, RequestsTable).splitlines() if " r1 " in line)

        app.submit("Once upon a time", app.query_one(PromptBar).settings)
        assert re.search(r"r1 SENT +16 ch  Once upon a time", row())  # not in the engine yet: characters
        await settle(pilot, lambda: app.state.requests["r1"].status == "waiting")
        assert re.search(r"r1 WAITING +0/6  Once upon a time", row())  # the engine has it: queued, in tokens
        await advance(pilot, 1)
        assert "RUNNING" in row()


async def test_keys_typed_faster_than_the_prompt_box_takes_the_focus_all_land_in_it(make_app):
    app = make_app(autostep=False)
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        for typed in ("Return the number of bytes", "/burst 2"):  # as a terminal delivers a fast typist
            for char in typed:  # all queued before the first is handled
                app.post_message(events.Key("space" if char == " " else char, char))
            await settle(pilot)
            assert app.query_one("#prompt").value == typed
            await pilot.press("enter")
        await settle(pilot, lambda: len(app.state.requests) == 3)
        assert (
            app.state.requests["r1"].prompt == "Return the number of bytes\n" and app.engine.paused
        )  # spaces were text
