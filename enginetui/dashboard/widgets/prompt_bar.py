"""Prompt box and sampling-settings bar; `/set`, `/burst` and `/help` are typed here too."""

from dataclasses import dataclass

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Input, Label, Static

from enginetui.dashboard.widgets.palette import DIM
from enginetui.settings import SamplingSettings, apply_set_command

PLACEHOLDER = "type a prompt, Enter sends · /set temp 0.7 · /burst 16 · /help"


class PromptInput(Input):
    """The prompt box: it has the focus from the start and takes every printable key (the
    dashboard's actions are on other keys, enginetui/keys.py)."""

    BINDINGS = [Binding("enter", "submit", "Send", tooltip="send the prompt (or run the /command)")]


class PromptBar(Vertical):
    """Where prompts are typed and sampling settings changed."""

    settings: reactive[SamplingSettings] = reactive(SamplingSettings)

    @dataclass
    class Submitted(Message):
        """A prompt to send."""

        text: str  # the prompt (as typed, ending its line: see _on_prompt_submitted)
        settings: SamplingSettings  # sampling settings to send it with

    @dataclass
    class BurstRequested(Message):
        """`/burst N`: submit N synthetic requests."""

        count: int  # how many

    @dataclass
    class HelpRequested(Message):
        """`/help`."""

    def compose(self) -> ComposeResult:
        with Horizontal(id="prompt-row"):
            yield Label("›", id="prompt-mark")
            box = PromptInput(placeholder=PLACEHOLDER, id="prompt", select_on_focus=False)
            box.cursor_blink = False  # a steady cursor: the box always has the focus, and each frame is the same
            yield box
        yield Static(id="settings")

    def focus_prompt(self, typed: str = "") -> None:
        """Move the focus into the prompt box at once (the next key typed lands there), with `typed`
        already typed."""
        box = self.query_one("#prompt", Input)
        self.screen.set_focus(box)
        if typed:
            box.insert_text_at_cursor(typed)

    def watch_settings(self, settings: SamplingSettings) -> None:
        line = Text(settings.summary())
        line.append("   /set NAME VALUE changes one", style=DIM)
        self.query_one("#settings", Static).update(line)

    @on(Input.Submitted, "#prompt")
    def _on_prompt_submitted(self, event: Input.Submitted) -> None:  # not _on_enter: Textual's mouse-enter handler
        text = event.value.strip()
        event.input.clear()
        if text.startswith("/"):
            self._command(text[1:])
        elif text:
            # Models continue text: a prompt that ends mid-line ("... brown fox") gets a reply that carries
            # on its last word ("ibly ..."); ending the line starts the reply on a line of its own.
            self.post_message(self.Submitted(text + "\n", self.settings))

    def _command(self, line: str) -> None:
        name, _, args = line.partition(" ")
        if name == "set":
            try:
                self.settings = apply_set_command(self.settings, args)
            except ValueError as exc:
                self.notify(str(exc), title="/set", severity="error")
        elif name == "burst":
            count = args.strip() or "8"
            if not count.isdigit() or int(count) < 1:
                self.notify(f"/burst needs a positive count, got '{count}'", severity="error")
                return
            self.post_message(self.BurstRequested(int(count)))
        elif name == "help":
            self.post_message(self.HelpRequested())
        else:
            self.notify(f"unknown command /{name} (try /set, /burst, /help)", severity="error")
