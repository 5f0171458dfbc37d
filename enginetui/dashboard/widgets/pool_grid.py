"""KV block pool grid: one cell per block (or per group of blocks), coloured by owning request,
with a legend below it of the glyphs it draws."""

from collections.abc import Mapping

from rich.text import Text
from textual.widget import Widget

from enginetui.core.ceil_div import cdiv
from enginetui.core.engine.events import StepEvent
from enginetui.dashboard.widgets.legend import Entry, fitting, legend_lines, title_room
from enginetui.dashboard.widgets.palette import DIM
from enginetui.dashboard.widgets.styled_runs import append_runs
from enginetui.plural import count

# Every glyph the grid draws and what it means, in legend order (the legend lists those on screen).
GLYPHS: dict[str, str] = {
    "█": "used",
    "▓": "half+ used",  # a grouped cell: at least half of its blocks held by requests
    "▒": "partly used",  # a grouped cell: fewer than half
    "▣": "new",
    "▫": "freed",
    "▦": "shared",
    "░": "cached",
    "·": "free",
}
MAX_LEGEND_LINES = 2  # the legend never takes more rows than this (every glyph fits in two at 80 columns)


def blocks_per_cell(num_blocks: int, width: int, height: int) -> int:
    """How many blocks one cell stands for so the whole pool fits in width x height."""
    return max(1, cdiv(num_blocks, max(1, width * height)))


def pool_cells(event: StepEvent, colors: Mapping[str, str], width: int, height: int) -> tuple[Text, set[str], int]:
    """The grid in `width` x `height` (a spaced cell per block when there is room, else grouped
    cells), the glyphs it drew and how many blocks a cell stands for."""
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
    drawn: set[str] = set()

    def pieces():  # each cell's glyph after its separator, in the cell's style
        for cell in range(cdiv(n, per_cell)):
            sep = "" if not cell else "\n" if cell % per_row == 0 else " " if spaced else ""
            group = range(cell * per_cell, min((cell + 1) * per_cell, n))
            glyph, style = _cell(group, owner, colors, new, freed, shared, cached)
            drawn.add(glyph)
            yield sep + glyph, style

    return append_runs(Text(no_wrap=True), pieces()), drawn, per_cell


def pool_text(event: StepEvent, colors: Mapping[str, str], width: int, height: int) -> tuple[Text, int]:
    """The grid and, at the bottom, the legend of the glyphs it drew, all in `width` x `height`;
    and how many blocks a cell stands for."""
    for legend_rows in range(1, MAX_LEGEND_LINES + 1):
        grid, drawn, per_cell = pool_cells(event, colors, width, max(1, height - legend_rows))
        legend = legend_lines(legend_entries(drawn), width)[:MAX_LEGEND_LINES]
        if len(legend) <= legend_rows:
            break
    rows = grid.plain.count("\n") + 1
    gap = "\n" * max(1, height - rows - len(legend) + 1)
    return grid.append(gap).append_text(Text("\n").join(legend)), per_cell


def legend_entries(drawn: set[str]) -> list[Entry]:
    return [(glyph, "bold" if glyph != "·" else DIM, meaning) for glyph, meaning in GLYPHS.items() if glyph in drawn]


def _cell(
    group: range,
    owner: list[str | None],
    colors: Mapping[str, str],
    new: set[int],
    freed: set[int],
    shared: set[int],
    cached: set[int],
) -> tuple[str, str]:
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

    def show(self, event: StepEvent | None, colors: Mapping[str, str]) -> None:
        self._event, self._colors = event, colors
        self.refresh()

    def _retitle(self, event: StepEvent, k: int) -> None:
        """`KV pool · used/total used (%) · 1 cell = k blocks`, as much of it as the frame holds."""
        n = event.num_blocks
        used = n - event.num_free_blocks
        pct = f"{100 * used / n if n else 0:.0f}%"
        cell = [f"1 cell = {count(k, 'block')}", f"{k} blocks/cell", f"{k} blk/cell"] if k > 1 else ["1 cell = 1 block"]
        variants = [f"KV pool · {used}/{n} used ({pct}) · {cell[0]}"]
        variants += [f"KV pool · {used}/{n} used ({pct}) · {c}" for c in cell[1:]]
        variants += [f"KV · {used}/{n} ({pct}) · {c}" for c in cell[1:]]
        if k == 1:  # one block per cell is what a grid means: said when there is room
            variants += [f"KV pool · {used}/{n} used ({pct})", f"KV pool · {used}/{n} ({pct})"]
        self.border_title = fitting(variants, title_room(self))

    def render(self) -> Text:
        if self._event is None:
            return Text("waiting for the engine…", style=DIM)
        size = self.content_size
        text, per_cell = pool_text(self._event, self._colors, size.width, size.height)
        self._retitle(self._event, per_cell)
        return text
