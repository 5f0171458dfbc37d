"""The prefix-cache panel: what vLLM holds, as a tree of blocks by hash chain, one tree per rank."""

from dataclasses import dataclass, field

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from enginetui.dashboard.widgets.palette import DIM
from enginetui.vllm_watch.kv_events import short_hash
from enginetui.vllm_watch.prefix_tree import PrefixCaches, RankCache, TreeRow

MAX_ROWS = 400  # tree lines drawn per rank (a big cache shows its first chains, then how many more)
HASH_STYLE = "#5c6370"
TEXT_STYLE = "#abb2bf"
EVICTED_STYLE = "strike #e06c75"
ORPHAN_STYLE = "#d19a66"
REUSED_STYLE = "bold #98c379"
STALE_STYLE = "bold #e5c07b"
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


@dataclass(frozen=True, slots=True)
class TreeContext:
    """What the tree panel shows beside the KV events: from /metrics and the links."""

    pool_blocks: str | None = None  # vLLM's pool size in blocks (None: unknown yet)
    block_size: str | None = None  # tokens per block from vLLM's cache config (None: unknown yet)
    hit_tokens: dict[int, float] = field(
        default_factory=dict
    )  # rank -> prompt tokens served from its prefix cache (/metrics)
    empty_note: str = ""  # what an empty cache says (how to get KV events, or why none came yet)
    stale_note: str = ""  # set while vLLM is down: the tree is the cache as last seen
    tokenizer_note: str = ""  # why blocks show token ids ("": they show text)


def rank_header(cache: RankCache, context: TreeContext, multi: bool) -> Text:
    pool = f"/{context.pool_blocks}" if context.pool_blocks else ""
    head = Text(f"rank {cache.rank} · " if multi else "", style="bold")
    head.append(f"{cache.num_cached}{pool} blocks cached", style="bold")
    size = cache.block_size or context.block_size  # a new server's tree has no BlockStored yet
    head.append(f" · {len(cache.roots())} chains" + (f" · {size} tok/block" if size else ""), style=DIM)
    hits = context.hit_tokens.get(cache.rank)
    if hits is not None:
        head.append(f" · {hits:.0f} tok hit", style=DIM)
    head.append(f" · stored {cache.num_stored} · evicted {cache.num_removed}", style=DIM)
    if cache.num_restored:
        head.append(f" · {cache.num_restored} re-stored", style=DIM)
    if cache.num_cleared:
        head.append(f" · reset {cache.num_cleared}×", style=DIM)
    return head


def tree_text(caches: PrefixCaches, context: TreeContext, width: int) -> Text:
    """Every rank's tree, rank by rank."""
    if not caches.ranks:
        return Text(context.empty_note, style=DIM)
    out = Text(no_wrap=True, overflow="ellipsis")
    if context.stale_note:
        out.append(context.stale_note + "\n", style=STALE_STYLE)
    if context.tokenizer_note:
        out.append(context.tokenizer_note + "\n", style=DIM)
    multi = len(caches.ranks) > 1
    for i, cache in enumerate(caches.ranks.values()):
        if i:
            out.append("\n")
        out.append_text(rank_header(cache, context, multi))
        rows = cache.rows(MAX_ROWS)
        if not rows:
            out.append(f"\n{context.empty_note}", style=DIM)
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
        self._shown: tuple[PrefixCaches, TreeContext] | None = None  # what show() drew (drawn again on resize)
        self._drawn: tuple | None = None  # (ranks' batches folded, decoder, context, width) on screen

    def compose(self) -> ComposeResult:
        yield Static(Text("waiting for KV events…", style=DIM), id="tree-body")

    def on_mount(self) -> None:
        self.border_title = "vLLM prefix cache · blocks by hash chain"
        self.border_subtitle = LEGEND

    def show(self, caches: PrefixCaches, context: TreeContext) -> None:
        """Every rank's tree, with what /metrics and the links say beside it."""
        self._shown = (caches, context)
        width = max(20, self.scrollable_content_region.width)
        drawn = (tuple((r, c.num_batches, id(c)) for r, c in caches.ranks.items()), id(caches.decode), context, width)
        if drawn == self._drawn:
            return
        self._drawn = drawn
        body = self.query_one("#tree-body", Static)
        body.set_class(not caches.ranks, "-note")  # the note wraps (it may hold the config to start vLLM with)
        body.update(tree_text(caches, context, width))

    def on_resize(self) -> None:
        if self._shown is not None:
            self.show(*self._shown)
