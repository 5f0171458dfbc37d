"""Help screen: every key and prompt command."""

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from enginetui.settings import SETTING_NAMES

PROMPT_KEYS = (
    ("Enter", "send the prompt (in the prompt box)"),
    ("Esc", "leave the prompt box (keys act on the dashboard again)"),
    ("/set NAME VALUE", f"change a sampling setting: {', '.join(SETTING_NAMES)} (seed -, stop - clear)"),
    ("/burst N", "submit N synthetic requests (like b)"),
    ("/help", "this screen"),
)


class HelpScreen(ModalScreen[None]):
    """Lists the app's key bindings (from its BINDINGS), the prompt commands and facts about the engine."""

    BINDINGS = [
        Binding("escape,question_mark,q", "dismiss", "Close help"),
    ]

    def __init__(self, keys: list[tuple[str, str]], about: list[tuple[str, str]] | None = None,
                 prompt_keys: bool = True, about_title: str = "engine") -> None:
        super().__init__()
        self.keys = keys  # (key as shown, what it does) of the dashboard
        self.about = about or []  # (label, value) rows about the engine: pool, log file
        self.prompt_keys = prompt_keys  # list the prompt box's keys (a replay has no prompt box)
        self.about_title = about_title  # heading of the `about` rows

    def compose(self) -> ComposeResult:
        table = Table(box=None, show_header=False, padding=(0, 2, 0, 0))
        table.add_column(style="bold #e5c07b", no_wrap=True)
        table.add_column()
        for key, what in self.keys:
            table.add_row(key, what)
        if self.prompt_keys:
            table.add_row("", "")
            table.add_row("[b]prompt box[/b]", "")
            for key, what in PROMPT_KEYS:
                table.add_row(key, what)
        if self.about:
            table.add_row("", "")
            table.add_row(f"[b]{self.about_title}[/b]", "")
            for label, value in self.about:
                table.add_row(label, value)
        with VerticalScroll(id="help"):  # scrolls (↑↓, wheel) when the terminal is short
            yield Static(table)

    def on_mount(self) -> None:
        help_box = self.query_one("#help")
        help_box.border_title = "enginetui · keys"
        help_box.border_subtitle = "Esc, ? or q closes this screen"  # on the frame: visible even when it scrolls
