"""KV block pool grid: one cell per block (or per group of blocks), coloured by owning request."""

import math
from collections.abc import Mapping

from rich.text import Text
from textual.widget import Widget

from core.engine.events import StepEvent
from enginetui.plural import count
from enginetui.widgets.palette import DIM
from enginetui.widgets.styled_runs import append_runs

LEGEND = "█ used ▣ new ▫ freed ▦ shared ░ cached · free"


def blocks_per_cell(num_blocks: int, width: int, height: int) -> int:
    """How many blocks one cell stands for so the whole pool fits in width x height."""
    return max(1, math.ceil(num_blocks / max(1, width * height)))


def pool_text(event: StepEvent, colors: Mapping[str, str], width: int, height: int) -> Text:
    """The grid in `width` x `height`: a spaced cell per block when there is room, else grouped cells."""
    n = event.num_blocks
    spaced = 2 * n <= width * height  # room for a gap after every cell
    per_cell = 1 if spaced else blocks_per_cell(n, width, height)
    per_row = max(1, width // 2 if spaced else width)
    owner: list[str | None] = [None] * n  # block -> owning request
    for req in (*event.running, *event.waiting):
        for block in req.block_ids:
            if owner[block] is None:
                owner[block] = req.req_id
    new, freed = set(event.blocks_allocated), set(event.blocks_freed)
    shared, cached = set(event.shared_blocks), set(event.cached_free_blocks)

    def pieces():  # each cell's glyph after its separator, in the cell's style
        for cell in range(math.ceil(n / per_cell)):
            sep = "" if not cell else "\n" if cell % per_row == 0 else " " if spaced else ""
            group = range(cell * per_cell, min((cell + 1) * per_cell, n))
            glyph, style = _cell(group, owner, colors, new, freed, shared, cached)
            yield sep + glyph, style

    return append_runs(Text(no_wrap=True), pieces())


def _cell(group: range, owner: list[str | None], colors: Mapping[str, str], new: set[int], freed: set[int],
          shared: set[int], cached: set[int]) -> tuple[str, str]:
    """Glyph and style of one cell standing for the blocks in `group`."""
    used = [b for b in group if owner[b] is not None]
    if used:
        fresh = [b for b in used if b in new]
        color = colors.get(owner[(fresh or used)[0]] or "", "white")
        if fresh:
            return "▣", f"bold {color}"
        if any(b in shared for b in used):
            return "▦", color
        return ("█" if len(used) == len(group) else "▓" if 2 * len(used) >= len(group) else "▒"), color
    if any(b in freed for b in group):
        return "▫", "bold #ffffff"
    if any(b in cached for b in group):
        return "░", DIM
    return "·", DIM


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
        cell = f"1 cell = {count(k, 'block')}"
        self.border_title = f"KV pool · {used}/{event.num_blocks} used ({pct:.0f}%) · {cell}"

    def render(self) -> Text:
        if self._event is None:
            return Text("waiting for the engine…", style=DIM)
        size = self.content_size
        return pool_text(self._event, self._colors, size.width, size.height)
