"""Model panel: what the engine runs, from the EngineInfo it sends once it has started (architecture,
parameters, dtype, context length, KV bytes per token, the KV pool in tokens and bytes, and the rule
that sized the pool)."""

from rich.text import Text
from textual.widget import Widget

from enginetui.core.engine.engine_info import EngineInfo
from enginetui.dashboard.widgets.palette import DIM

RANDOM_WEIGHTS_STYLE = "bold #d19a66"  # the same warning colour as in the title bar
SEPARATOR = " · "


def short_count(n: int) -> str:
    """125239296 -> "125.2M", 1100048384 -> "1.10B", 512 -> "512"."""
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            value = n / scale
            return f"{value:.2f}{unit}" if value < 10 else f"{value:.1f}{unit}"
    return str(n)


def binary_size(num_bytes: int) -> str:
    """36864 -> "36 KiB", 301989888 -> "288 MiB", 1536 -> "1.5 KiB" (1024-based units)."""
    value, unit = float(num_bytes), "B"
    for bigger in ("KiB", "MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{value:.1f} {unit}" if unit != "B" and value < 10 else f"{value:.0f} {unit}"


def model_items(info: EngineInfo, random_weights: bool, pool_rule: str | None = None) -> list[Text]:
    """The panel's facts, each kept whole on one line; `pool_rule` says who sized the pool where the
    engine's own rule would name a flag nobody gave (the dashboard's default pool). A fact the source
    does not know (0 or empty: a vLLM's recording has no parameter count, KV bytes or dtype) is left
    out; without a parameter count the model is named (its name or path) before its architecture."""
    if info.num_parameters:
        items = [Text(info.architecture, style="bold"), Text(f"{short_count(info.num_parameters)} params")]
    else:  # an engine elsewhere (vLLM): its name says which model
        items = [Text(info.model_name, style="bold"), *([Text(info.architecture)] if info.architecture else [])]
    if random_weights:
        items.append(Text("random weights", style=RANDOM_WEIGHTS_STYLE))
    items += [Text(info.dtype)] if info.dtype else []
    items += [Text(f"context {info.max_model_len:,} tok")] if info.max_model_len else []
    if info.kv_bytes_per_token:
        items.append(Text(f"KV {binary_size(info.kv_bytes_per_token)}/tok"))
    if info.kv_pool_tokens:
        pool = f"pool {info.kv_pool_tokens:,} tok"
        kv_bytes = info.kv_pool_tokens * info.kv_bytes_per_token
        items.append(Text(f"{pool} = {binary_size(kv_bytes)}" if kv_bytes else pool))
    rule = pool_rule or info.kv_pool_rule  # how the pool was sized (core/engine/kv_sizing.py); older recordings lack it
    if rule:
        items.append(Text(f"sized by {rule}", style=DIM))
    items += [Text(info.cuda_graphs_text, style=DIM)] if info.cuda_graphs_text else []  # CUDA engines only
    return items


def wrap_items(items: list[Text], width: int, separator: str = SEPARATOR) -> Text:
    """The items joined by `separator`, a new line instead wherever the next one would not fit in `width`."""
    text, line_length = Text(), 0
    for item in items:
        if line_length and line_length + len(separator) + len(item) > width:
            text.append("\n")
            line_length = 0
        elif line_length:
            text.append(separator, style=DIM)
            line_length += len(separator)
        text.append_text(item)
        line_length += len(item)
    return text


class ModelPanel(Widget):
    """The model and its KV cache in a few words; as many lines as the width needs."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._items: list[Text] = []  # the facts on show (none before the first redraw)
        self.border_title = "Model"

    def show(self, info: EngineInfo | None, random_weights: bool, pool_rule: str | None = None) -> None:
        self.show_items(model_items(info, random_weights, pool_rule) if info is not None else [])

    def show_items(self, items: list[Text]) -> None:
        """The facts as given (none: "not known"), where a source knows fewer than an EngineInfo holds."""
        items = items or [Text("not known", style=DIM)]
        if items != self._items:
            self._items = items
            self.refresh(layout=True)  # the line count may change

    def render(self) -> Text:
        return wrap_items(self._items, self.content_size.width)

    def get_content_height(self, container, viewport, width: int) -> int:
        return len(wrap_items(self._items, width).split("\n")) if self._items else 1
