"""Typing is typing: from the start, and after every action, a sentence goes whole into the prompt
box of the engine dashboard, whatever letter it starts with; no letter of it runs an action, and
the app keeps running. (The vLLM watch's twin is tests/vllm_watch/test_typing.py.)"""

import pytest
from textual import events
from textual.keys import _character_to_key

from enginetui.dashboard.app import EngineTUI
from enginetui.dashboard.widgets.help_screen import HelpScreen
from tests.dashboard.scenes import SIZE, settle, start
from tests.support.sentences import SENTENCES

# Each action reached by its key, in an order the fake engine can follow (pause before step, etc.).
ACTIONS = (
    "ctrl+b",
    "ctrl+p",
    "ctrl+s",
    "ctrl+p",
    "pagedown",
    "pageup",
    "down",
    "up",
    "ctrl+x",
    "ctrl+l",
    "ctrl+t",
    "ctrl+t",
    "f1",
    "escape",
    "f1",
)


def keys_for(text: str) -> list[str]:
    """The key names a terminal sends for `text`."""
    return [_character_to_key(char) for char in text]


async def type_text(pilot, text: str) -> None:
    """Type `text` as a terminal delivers a typist's keys (all queued at once, as Pilot posts them)."""
    for char in text:
        pilot.app.post_message(events.Key(_character_to_key(char), char))
    await settle(pilot)


def what_ran(app: EngineTUI) -> tuple:
    """Everything an action could change: requests, pause, pace, selection, timeline, screens, notes."""
    timeline = app.query_one("#timeline").display
    return (
        len(app.state.requests),
        app.paused,
        app.state.step_interval_ms,
        app.selected,
        timeline,
        len(app.screen_stack),
        len(app.notes),
        app.state.step,
    )


async def type_each_sentence(pilot, app: EngineTUI) -> None:
    """Type every sentence into the prompt box; each must land whole and change nothing else."""
    box = app.query_one("#prompt")
    for sentence in SENTENCES:
        await settle(pilot)
        box.value = ""
        before = what_ran(app)
        await type_text(pilot, sentence)
        assert box.value == sentence, f"typed {sentence!r}, the prompt box holds {box.value!r}"
        assert what_ran(app) == before, f"typing {sentence!r} ran an action"
        assert app.is_running and app.focused is box
    box.value = ""


@pytest.mark.slow
async def test_sentences_starting_with_any_key_are_typed_at_start_and_after_every_action(make_app):
    app = make_app(autostep=False, num_blocks=48)
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        await type_each_sentence(pilot, app)
        for key in ACTIONS:
            await pilot.press(key)
            await settle(pilot)
            if isinstance(app.screen, HelpScreen):  # typing closes the help screen and types
                await type_text(pilot, "quick")
                assert not isinstance(app.screen, HelpScreen) and app.query_one("#prompt").value == "quick"
                app.query_one("#prompt").value = ""
            await type_each_sentence(pilot, app)
        assert app.state.step > 0 and app.is_running  # the actions ran (^p resumed, ^s stepped)


async def test_sentences_are_typed_after_the_engine_stopped(make_app):
    app = make_app(autostep=False)
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        app.fake.die()
        await settle(pilot, lambda: app.phase == "stopped")
        await type_each_sentence(pilot, app)
        assert app.phase == "stopped"


async def test_a_typed_sentence_is_sent_whole(make_app):
    app = make_app(autostep=False)
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        await pilot.press(*keys_for("quick brown fox"), "enter")
        await settle(pilot, lambda: "r1" in app.state.requests)
        assert app.state.requests["r1"].prompt == "quick brown fox\n" and app.is_running  # ending its line
        assert app.query_one("#prompt").value == ""
