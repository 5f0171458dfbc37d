"""KV block pool grid: one cell per block (or per group of blocks), coloured by owning request."""

import math
from collections.abc import Mapping

from rich.text import Text
from textual.widget import Widget

from core.engine.events import StepEvent
from enginetui.widgets.palette import DIM

LEGEND = "█ used ▣ new ▫ freed ▦ shared ░ cached · free"


def blocks_per_cell(num_blocks: int, width: int, height: int) -> int:
    """How many blocks one cell stands for so the whole pool fits in width x height."""
    return max(1, math.ceil(num_blocks / max(1, width * height)))


def pool_text(event: StepEvent, colors: Mapping[str, str], width: int, height: int) -> Text:
    """The grid in `width` x `height`: a spaced cell per block when there is room, else grouped cells."""
    spaced = 2 * event.num_blocks <= width * height  # room for a gap after every cell
    per_cell = 1 if spaced else blocks_per_cell(event.num_blocks, width, height)
    per_row = max(1, width // 2 if spaced else width)
    owner: dict[int, str] = {}
    for req in (*event.running, *event.waiting):
        for block in req.block_ids:
            owner.setdefault(block, req.req_id)
    new, freed = set(event.blocks_allocated), set(event.blocks_freed)
    shared, cached = set(event.shared_blocks), set(event.cached_free_blocks)
    text = Text(no_wrap=True)
    num_cells = math.ceil(event.num_blocks / per_cell)
    for cell in range(num_cells):
        if cell and cell % per_row == 0:
            text.append("\n")
        elif cell and spaced:
            text.append(" ")
        group = range(cell * per_cell, min((cell + 1) * per_cell, event.num_blocks))
        used = [b for b in group if b in owner]
        if used:
            fresh = [b for b in used if b in new]
            color = colors.get(owner[(fresh or used)[0]], "white")
            if fresh:
                text.append("▣", style=f"bold {color}")
            elif any(b in shared for b in used):
                text.append("▦", style=color)
            else:
                glyph = "█" if len(used) == len(group) else "▓" if 2 * len(used) >= len(group) else "▒"
                text.append(glyph, style=color)
        elif any(b in freed for b in group):
            text.append("▫", style="bold #ffffff")
        elif any(b in cached for b in group):
            text.append("░", style=DIM)
        else:
            text.append("·", style=DIM)
    return text


class PoolGrid(Widget):
    """The block pool of the latest step; groups blocks into cells when the pool outgrows the panel."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._event: StepEvent | None = None  # latest step event
        self._colors: Mapping[str, str] = {}  # req_id -> colour
        self.border_title = "KV block pool"
        self.border_subtitle = LEGEND

    def show(self, event: StepEvent | None, colors: Mapping[str, str]) -> None:
        self._event, self._colors = event, colors
        self._retitle()
        self.refresh()

    def on_resize(self) -> None:
        self._retitle()

    def _retitle(self) -> None:
        event = self._event
        if event is None:
            return
        used = event.num_blocks - event.num_free_blocks
        pct = 100 * used / event.num_blocks if event.num_blocks else 0
        size = self.content_size
        k = blocks_per_cell(event.num_blocks, size.width, size.height)
        cell = "1 cell = 1 block" if k == 1 else f"1 cell = {k} blocks"
        self.border_title = f"KV pool · {used}/{event.num_blocks} used ({pct:.0f}%) · {cell}"

    def render(self) -> Text:
        if self._event is None:
            return Text("waiting for the engine…", style=DIM)
        size = self.content_size
        return pool_text(self._event, self._colors, size.width, size.height)
