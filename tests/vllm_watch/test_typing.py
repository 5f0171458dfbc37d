"""Typing is typing in the vLLM watch too: from the start, and after every action, a sentence goes
whole into the prompt box whatever letter it starts with, no action runs, the app keeps running.
(The sentences are the engine dashboard's too: tests/support/sentences.py.)"""

import pytest
from textual import events
from textual.keys import _character_to_key

from enginetui.dashboard.widgets.help_screen import HelpScreen
from enginetui.vllm_watch.app import VllmWatchApp
from tests.support.pilot import until
from tests.support.sentences import SENTENCES
from tests.vllm_watch.watch_pilot import POLL_S, step_time

# The sentences that start with a letter the watch once took as a key (all of SENTENCES take too long here).
WATCH_SENTENCES = tuple(s for s in SENTENCES if s[0] in "qbcxri? ")
ACTIONS = ("ctrl+b", "down", "up", "ctrl+x", "ctrl+l", "ctrl+r", "f1", "escape", "f1")  # each action's key


class NotingWatch(VllmWatchApp):
    """The watch app, counting the notifications it shows."""

    notes = 0  # notifications shown so far

    def notify(self, *args, **kwargs) -> None:
        self.notes += 1
        super().notify(*args, **kwargs)


def what_ran(app: VllmWatchApp) -> tuple:
    """Everything an action could change: requests, selection, screens, resets, notifications."""
    caches = app.state.caches.ranks.get(0)
    return (len(app.state.requests), app.selected, len(app.screen_stack), caches and caches.num_cleared, app.notes)


async def type_text(pilot, text: str) -> None:
    """Type `text` as a terminal delivers a typist's keys."""
    for char in text:
        pilot.app.post_message(events.Key(_character_to_key(char), char))
    await pilot.pause(0.05)
    await pilot.wait_for_scheduled_animations()


async def type_each_sentence(pilot, app: VllmWatchApp) -> None:
    box = app.query_one("#prompt")
    for sentence in WATCH_SENTENCES:
        box.value = ""
        before = what_ran(app)
        await type_text(pilot, sentence)
        await until(pilot, lambda sentence=sentence: box.value == sentence, timeout=5.0)
        assert what_ran(app) == before, f"typing {sentence!r} ran an action"
        assert app.is_running and app.focused is box
    box.value = ""


@pytest.mark.slow
async def test_sentences_starting_with_any_key_are_typed_at_start_and_after_every_action(fake):  # noqa: F811 (the fixture)
    app = NotingWatch(fake.url, kv_events=fake.kv_endpoint, kv_replay=fake.replay_endpoint, poll_s=POLL_S)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.state.server is not None)
        fake.play_until(step_time("a streamed completion"))
        await until(pilot, lambda: app.state.caches.ranks and app.state.caches.ranks[0].num_cached >= 4)
        await type_each_sentence(pilot, app)
        for key in ACTIONS:
            await pilot.press(key)
            await pilot.pause(0.1)
            if key == "ctrl+r":  # vLLM's AllBlocksCleared comes back as a KV event
                await until(pilot, lambda: app.state.caches.ranks[0].num_cleared == 1)
            if isinstance(app.screen, HelpScreen):  # typing closes the help screen and types
                await type_text(pilot, "quick")
                await until(pilot, lambda: app.query_one("#prompt").value == "quick")
                assert not isinstance(app.screen, HelpScreen)
                app.query_one("#prompt").value = ""
            await type_each_sentence(pilot, app)
        assert app.state.caches.ranks[0].num_cleared == 1 and app.is_running  # the actions did run
