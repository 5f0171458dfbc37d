"""What every dashboard app that takes prompts does alike: the prompt box takes every printable key
(actions are on keys text never uses, enginetui/keys.py), the prompt bar's and the requests table's
messages, the help screen, and a compact footer in narrow terminals."""

from typing import TYPE_CHECKING

from textual import events
from textual.app import App
from textual.widgets import Footer

from enginetui import keys
from enginetui.dashboard.widgets.help_screen import HelpScreen
from enginetui.dashboard.widgets.prompt_bar import PromptBar
from enginetui.dashboard.widgets.requests_table import RequestsTable
from enginetui.keys import TYPING_NOTE

if TYPE_CHECKING:
    from enginetui.dashboard.redraw_pacer import RedrawPacer
    from enginetui.settings import SamplingSettings

    _AppBase = App  # type-checked as the App it is mixed into
else:
    _AppBase = object

NARROW = 100  # terminals narrower than this get the -narrow layout (app.tcss) and a compact footer
MODAL_ACTIONS = frozenset({"help", "quit"})  # app actions that apply while a screen (help, jump) is over the dashboard


class PromptingApp(_AppBase):
    """Mixed into a Textual app that has a PromptBar, `submit(text, settings)`, `burst(count)`,
    `action_help()` and a `selected` request id (Textual finds these handlers by their names,
    through the app's MRO); and a `redraw()` that records the `_draw_key()` it drew in `_drawn`,
    with a `pacer` (RedrawPacer) for its redraw timer."""

    selected: str | None
    pacer: "RedrawPacer"
    _drawn: object

    if TYPE_CHECKING:  # what the app provides (defined here, they would come before the app's own in the MRO)

        def _draw_key(self) -> object: ...

        def redraw(self) -> None: ...

        def submit(self, prompt: str, settings: SamplingSettings) -> None: ...

        def burst(self, count: int) -> None: ...

        def action_help(self) -> None: ...

    def _redraw_tick(self) -> None:
        """The redraw timer: draw if the state changed and the dashboard's CPU budget allows it now.
        Redraws asked for directly (a key, a click) are never held back."""
        if self._draw_key() != self._drawn and self.pacer.may_draw():
            self.redraw()

    def on_key(self, event: events.Key) -> None:
        """A printable key that reaches the app (the prompt box lost the focus to a click or Tab, or
        the help screen is open) goes into the prompt box: it takes the focus back, the help screen
        closes. No printable key is an action (enginetui/keys.py), so text is never a command."""
        if not self.screen_stack:  # a key that came while the app closed
            return
        bar = self.screen_stack[0].query_one(PromptBar)  # the dashboard's, whatever screen is on top
        if not event.is_printable or not bar.display:
            return
        if isinstance(self.screen, HelpScreen):
            self.screen.action_close()
        elif len(self.screen_stack) > 1:  # another screen takes its own keys
            return
        event.prevent_default()
        event.stop()
        bar.focus_prompt(event.character or "")

    def key_rows(self) -> list[tuple[str, str]]:
        """The help screen's key rows: how typing works, then each binding as the footer names its key."""
        rows = [("type", TYPING_NOTE)]
        return rows + keys.key_rows(self, self.BINDINGS)

    def show_help(self, panels: list[tuple[str, str]], about: list[tuple[str, str]], **options) -> None:
        """Open the help screen (HelpScreen's `options`), or close it if it is open."""
        if isinstance(self.screen, HelpScreen):
            self.screen.action_close()
        else:
            self.push_screen(HelpScreen(self.key_rows(), panels, about, **options))

    def on_resize(self, event: events.Resize) -> None:
        self._fit_footer(event.size.width)

    def _fit_footer(self, columns: int) -> None:
        for footer in self.query(Footer):  # none yet if the terminal reports its size before the screen is up
            footer.compact = columns < NARROW  # every key in 80 columns

    def on_prompt_bar_submitted(self, message: PromptBar.Submitted) -> None:
        self.submit(message.text, message.settings)

    def on_prompt_bar_burst_requested(self, message: PromptBar.BurstRequested) -> None:
        self.burst(message.count)

    def on_prompt_bar_help_requested(self) -> None:
        self.action_help()

    def on_requests_table_clicked(self, message: RequestsTable.Clicked) -> None:
        self.selected = message.req_id
