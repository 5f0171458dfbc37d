"""What every dashboard app does alike: letters typed anywhere go to the prompt box, the prompt
bar's and the requests table's messages, and a compact footer in narrow terminals."""

from textual import events
from textual.widgets import Footer

from enginetui.widgets.prompt_bar import PromptBar, PromptInput
from enginetui.widgets.requests_table import RequestsTable

NARROW = 100  # terminals narrower than this get the -narrow layout (app.tcss) and a compact footer


class PromptingApp:
    """Mixed into a Textual app that has a PromptBar, `submit(text, settings)`, `burst(count)`,
    `action_help()` and a `selected` request id (Textual finds these handlers by their names,
    through the app's MRO); and a `redraw()` that records the `_draw_key()` it drew in `_drawn`,
    with a `pacer` (RedrawPacer) for its redraw timer."""

    def _redraw_tick(self) -> None:
        """The redraw timer: draw if the state changed and the dashboard's CPU budget allows it now.
        Redraws asked for directly (a key, a click) are never held back."""
        if self._draw_key() != self._drawn and self.pacer.may_draw():
            self.redraw()

    def on_key(self, event: events.Key) -> None:
        """A printable key that is not a dashboard key types into the prompt box, opening it if needed:
        `/` starts a command, a letter a prompt. Keys typed faster than the box took the focus (sent
        to the dashboard before it moved) arrive here too, after that one: they go into the box, in order."""
        typing = self.focused is None or isinstance(self.focused, PromptInput)
        if typing and len(self.screen_stack) == 1 and event.is_printable and event.key not in self.active_bindings:
            event.prevent_default()
            self.query_one(PromptBar).focus_prompt(event.character or "")

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
