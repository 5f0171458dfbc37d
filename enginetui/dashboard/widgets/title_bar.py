"""Title bar: the engine's state in words, its step counter and pace, then the model."""

from rich.text import Text
from textual.widgets import Static

PHASES = {
    "starting": ("⏳ starting engine…", "#e5c07b"),
    "running": ("▶ running", "bold #98c379"),
    "paused": ("⏸ paused", "bold #e5c07b"),
    "stopped": ("✖ engine stopped", "bold #be5046"),
    "replay": ("replay of a recording", "bold #61afef"),  # what a recording shows is over: never "running"
}


class TitleBar(Static):
    """`enginetui ▶ running · step N · 250 ms/step · model`: what matters most first, so a narrow
    terminal cuts only the model name."""

    def show(
        self,
        model: str,
        step: int,
        phase: str,
        step_interval_ms: float = 0.0,
        random_weights: bool = False,
        hint: str = "",
    ) -> None:
        """`hint`: what to do about the phase (`r restarts`), said right after it."""
        label, style = PHASES[phase]
        text = Text("enginetui ", style="bold")
        text.append(label, style=style)
        if hint:
            text.append(f" · {hint}", style=style)
        text.append(f" · step {step}")
        if step_interval_ms > 0:
            text.append(f" · {step_interval_ms:.0f} ms/step", style="bold #61afef")  # slow motion
        text.append(f" · {model}")
        if random_weights:
            text.append(" · random weights", style="bold #d19a66")
        self.update(text)
