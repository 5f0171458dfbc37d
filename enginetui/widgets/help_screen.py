"""Help screen: every key and prompt command."""

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from enginetui.settings import SETTING_NAMES

PROMPT_KEYS = (
    ("Enter", "send the prompt (in the prompt box)"),
    ("Esc", "leave the prompt box (keys act on the dashboard again)"),
    ("/set NAME VALUE", f"change a sampling setting: {', '.join(SETTING_NAMES)} (seed -, stop - clear)"),
    ("/burst N", "submit N synthetic requests"),
    ("/help", "this screen"),
)


class HelpScreen(ModalScreen[None]):
    """Lists the app's key bindings (from its BINDINGS) and the prompt commands."""

    BINDINGS = [
        Binding("escape,question_mark,q", "dismiss", "Close help"),
    ]

    def __init__(self, keys: list[tuple[str, str]]) -> None:
        super().__init__()
        self.keys = keys  # (key as shown, what it does) of the dashboard

    def compose(self) -> ComposeResult:
        table = Table(box=None, show_header=False, padding=(0, 2, 0, 0))
        table.add_column(style="bold #e5c07b", no_wrap=True)
        table.add_column()
        for key, what in self.keys:
            table.add_row(key, what)
        table.add_row("", "")
        table.add_row("[b]prompt box[/b]", "")
        for key, what in PROMPT_KEYS:
            table.add_row(key, what)
        with Vertical(id="help"):
            yield Static(table)
            yield Static("Esc, ? or q closes this screen", id="help-foot")

    def on_mount(self) -> None:
        self.query_one("#help").border_title = "enginetui · keys"
