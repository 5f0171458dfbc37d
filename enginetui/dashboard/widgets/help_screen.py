"""Help screen: how typing works, every key, the prompt commands, what each panel shows."""

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from enginetui.settings import SETTING_NAMES

PROMPT_KEYS = (
    ("Enter", "send the prompt (or run the /command)"),
    ("/set NAME VALUE", f"change a sampling setting: {', '.join(SETTING_NAMES)} (seed -, stop - clear)"),
    ("/burst N", "submit N synthetic requests (like ^b)"),
    ("/help", "this screen (like F1)"),
)


class HelpScreen(ModalScreen[None]):
    """Lists the app's keys (from its BINDINGS), the prompt commands, a line per panel and facts
    about the engine. Esc or F1 closes it; so does typing, where the app takes prompts (the app
    closes it and the letter goes into the prompt box)."""

    BINDINGS = [Binding("escape,f1", "close", "Close help")]

    def __init__(
        self,
        keys: list[tuple[str, str]],
        panels: list[tuple[str, str]],
        about: list[tuple[str, str]] | None = None,
        prompt_keys: bool = True,
        about_title: str = "engine",
    ) -> None:
        super().__init__()
        self.keys = keys  # (key as shown, what it does) of the dashboard
        self.panels = panels  # (panel, what it shows in a line) of the dashboard
        self.about = about or []  # (label, value) rows about the engine: pool, log file
        self.prompt_keys = prompt_keys  # list the prompt box's keys (a replay has no prompt box)
        self.about_title = about_title  # heading of the `about` rows
        self.closing = False  # close() was called: keys typed before the screen is gone must not close it again

    def action_close(self) -> None:
        """Close the screen, once (keys typed fast can ask again before it is gone)."""
        if not self.closing:
            self.closing = True
            self.dismiss()

    def compose(self) -> ComposeResult:
        table = Table(box=None, show_header=False, padding=(0, 2, 0, 0))
        table.add_column(style="bold #e5c07b", no_wrap=True)
        table.add_column()
        sections = [("keys", self.keys)]
        if self.prompt_keys:
            sections.append(("prompt box", list(PROMPT_KEYS)))
        sections.append(("panels", self.panels))
        if self.about:
            sections.append((self.about_title, self.about))
        for i, (title, rows) in enumerate(sections):
            if i:
                table.add_row("", "")
            table.add_row(f"[b]{title}[/b]", "")
            for key, what in rows:
                table.add_row(key, what)
        with VerticalScroll(id="help"):  # scrolls (↑↓, wheel) when the terminal is short
            yield Static(table)

    def on_mount(self) -> None:
        help_box = self.query_one("#help")
        help_box.border_title = "enginetui · help"
        closes = "Esc or F1 closes this screen" + (" · typing goes to the prompt" if self.prompt_keys else "")
        help_box.border_subtitle = closes  # on the frame: visible even when it scrolls
