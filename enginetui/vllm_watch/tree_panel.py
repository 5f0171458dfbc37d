"""The prefix-cache panel: what vLLM holds, as a tree of blocks by hash chain, one tree per rank."""

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from enginetui.vllm_watch.kv_events import short_hash
from enginetui.vllm_watch.prefix_tree import PrefixCaches, RankCache, TreeRow
from enginetui.widgets.palette import DIM

MAX_ROWS = 400  # tree lines drawn per rank (a big cache shows its first chains, then how many more)
HASH_STYLE = "#5c6370"
TEXT_STYLE = "#abb2bf"
EVICTED_STYLE = "strike #e06c75"
ORPHAN_STYLE = "#d19a66"
REUSED_STYLE = "bold #98c379"
LEGEND = "⋯ parent not cached · ✗ evicted · ×N stored N times"


def block_label(row: TreeRow, width: int) -> Text:
    """One tree line: glyphs, short hash, the block's text (or token ids), marks."""
    block = row.block
    line = Text(no_wrap=True, overflow="ellipsis")
    line.append(row.prefix, style=DIM)
    if row.orphan:
        line.append("⋯ ", style=ORPHAN_STYLE)
    line.append(short_hash(block.block_hash) + " ", style=HASH_STYLE)
    if block.text is not None:
        body = repr(block.text.replace("\n", "⏎"))[1:-1]
    else:
        body = "[" + " ".join(str(t) for t in block.token_ids) + "]"
    marks = ""
    if block.times_stored > 1:
        marks += f" ×{block.times_stored}"
    if not block.cached:
        marks += " ✗ evicted"
    room = max(8, width - len(line) - len(marks))
    if len(body) > room:
        body = body[: room - 1] + "…"
    line.append(body, style=EVICTED_STYLE if not block.cached else TEXT_STYLE)
    if block.times_stored > 1:
        line.append(f" ×{block.times_stored}", style=REUSED_STYLE)
    if not block.cached:
        line.append(" ✗ evicted", style="bold #e06c75")
    return line


def rank_header(cache: RankCache, pool_blocks: str | None, multi: bool) -> Text:
    pool = f"/{pool_blocks}" if pool_blocks else ""
    head = Text(f"rank {cache.rank} · " if multi else "", style="bold")
    head.append(f"{cache.num_cached}{pool} blocks cached", style="bold")
    head.append(f" · {len(cache.roots())} chains · {cache.block_size} tok/block · stored {cache.num_stored}"
                f" · evicted {cache.num_removed} · reused {cache.num_reused}", style=DIM)
    if cache.num_cleared:
        head.append(f" · reset {cache.num_cleared}×", style=DIM)
    return head


def tree_text(caches: PrefixCaches, pool_blocks: str | None, width: int, empty_note: str) -> Text:
    """Every rank's tree, rank by rank."""
    if not caches.ranks:
        return Text(empty_note, style=DIM)
    out = Text(no_wrap=True, overflow="ellipsis")
    multi = len(caches.ranks) > 1
    for i, cache in enumerate(caches.ranks.values()):
        if i:
            out.append("\n")
        out.append_text(rank_header(cache, pool_blocks, multi))
        rows = cache.rows(MAX_ROWS)
        if not rows:
            out.append("\n(empty: no full block cached yet)", style=DIM)
        for row in rows:
            out.append("\n").append_text(block_label(row, width))
        shown = len(cache.blocks)
        if len(rows) < shown:
            out.append(f"\n… {shown - len(rows)} more blocks", style=DIM)
    return out


class PrefixTreePanel(VerticalScroll):
    """Scrolls (wheel, or click and ↑↓ PgUp PgDn) when the tree is taller than the panel."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._shown: tuple[PrefixCaches, str | None, str] | None = None  # what show() drew (drawn again on resize)

    def compose(self) -> ComposeResult:
        yield Static(Text("waiting for KV events…", style=DIM), id="tree-body")

    def on_mount(self) -> None:
        self.border_title = "vLLM prefix cache · blocks by hash chain"
        self.border_subtitle = LEGEND

    def show(self, caches: PrefixCaches, pool_blocks: str | None, empty_note: str) -> None:
        """Every rank's tree; `pool_blocks` is vLLM's pool size (None: unknown yet)."""
        self._shown = (caches, pool_blocks, empty_note)
        width = max(20, self.scrollable_content_region.width)
        body = self.query_one("#tree-body", Static)
        body.set_class(not caches.ranks, "-note")  # the note wraps (it may hold the config to start vLLM with)
        body.update(tree_text(caches, pool_blocks, width, empty_note))

    def on_resize(self) -> None:
        if self._shown is not None:
            self.show(*self._shown)
