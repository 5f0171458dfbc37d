"""What every dashboard app does with the prompt bar's and the requests table's messages."""

from enginetui.widgets.prompt_bar import PromptBar
from enginetui.widgets.requests_table import RequestsTable


class PromptingApp:
    """Mixed into a Textual app that has `submit(text, settings)`, `burst(count)`, `action_help()` and
    a `selected` request id (Textual finds these handlers by their names, through the app's MRO)."""

    def on_prompt_bar_submitted(self, message: PromptBar.Submitted) -> None:
        self.submit(message.text, message.settings)

    def on_prompt_bar_burst_requested(self, message: PromptBar.BurstRequested) -> None:
        self.burst(message.count)

    def on_prompt_bar_help_requested(self) -> None:
        self.action_help()

    def on_requests_table_clicked(self, message: RequestsTable.Clicked) -> None:
        self.selected = message.req_id
