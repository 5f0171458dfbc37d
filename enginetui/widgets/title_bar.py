"""Title bar: model, device, step counter and the engine's state in words."""

from rich.text import Text
from textual.widgets import Static

PHASES = {
    "starting": ("⏳ starting engine…", "#e5c07b"),
    "running": ("▶ running", "bold #98c379"),
    "paused": ("⏸ paused", "bold #e5c07b"),
    "stopped": ("✖ engine stopped", "bold #be5046"),
}


class TitleBar(Static):
    """`enginetui · model · step N · ▶ running`."""

    def show(self, model: str, step: int, phase: str) -> None:
        label, style = PHASES[phase]
        text = Text("enginetui", style="bold")
        text.append(f" · {model} · step {step} · ")
        text.append(label, style=style)
        self.update(text)
