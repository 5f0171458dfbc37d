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
    """`enginetui · model · step N · ▶ running`, and the slow-motion pace when there is one."""

    def show(self, model: str, step: int, phase: str, step_interval_ms: float = 0.0) -> None:
        label, style = PHASES[phase]
        text = Text("enginetui", style="bold")
        text.append(f" · {model} · step {step} · ")
        text.append(label, style=style)
        if step_interval_ms > 0:
            text.append(f" · {step_interval_ms:.0f} ms/step", style="bold #61afef")  # slow motion
        self.update(text)
