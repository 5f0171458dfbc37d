"""A fleet of vLLM replicas (`enginetui attach --vllm URL --vllm URL ...`): a panel per replica
(its links, queues, KV use, prefix-cache hit rate, TTFT) and a fleet view of which prefixes are
cached where, as a prefix-aware router would need it.

Replicas hash blocks with their own seed (vLLM's NONE_HASH is random per process unless
PYTHONHASHSEED is set), so the same prefix has different hashes on two replicas: the fleet view
matches blocks by their tokens, from the first block of each chain down.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field

from rich.text import Text

from enginetui.dashboard.widgets.palette import DIM
from enginetui.vllm_watch import prometheus as m
from enginetui.vllm_watch.panels import LINK_STYLES, duration, pct
from enginetui.vllm_watch.prefix_tree import BlockKey, RankCache
from enginetui.vllm_watch.state import WatchState

REPLICA_NAMES = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"  # each replica's letter in the fleet view
MAX_FLEET_ROWS = 200  # prefix rows drawn
HELD_STYLE = "bold #98c379"


@dataclass(slots=True)
class PrefixNode:
    """One block's content in the fleet: the replicas whose caches hold it after the same prefix."""

    tokens: tuple[int, ...]  # the block's tokens
    text: str | None  # decoded (None: no replica had a tokenizer)
    holders: set[str] = field(default_factory=set)  # replica letters caching it (after the same blocks)
    children: dict[tuple[int, ...], "PrefixNode"] = field(default_factory=dict)  # next blocks, by tokens


@dataclass(frozen=True, slots=True)
class FleetRow:
    """A run of blocks held by the same replicas, as one line."""

    prefix: str  # tree glyphs before it
    text: str  # the first block's text (or token ids), then how many blocks the run has
    blocks: int  # blocks in the run
    holders: frozenset[str]  # replicas caching the whole run


def fleet_tree(replicas: Sequence[tuple[str, WatchState]]) -> PrefixNode:
    """Every replica's cached blocks merged by content: a trie of blocks from the chains' first blocks.
    A chain whose first blocks are not cached (evicted, or stored before we listened) is left out:
    where its prefix lies is unknown."""
    root = PrefixNode((), None)
    for name, state in replicas:
        for cache in state.caches.ranks.values():
            for key, block in cache.blocks.items():
                if not block.cached:
                    continue
                path = _path(cache, key)
                if path is None:
                    continue
                node = root
                for step in path:
                    b = cache.blocks[step]
                    node = node.children.setdefault(b.token_ids, PrefixNode(b.token_ids, b.text))
                    node.text = node.text if node.text is not None else b.text
                node.holders.add(name)
    return root


def fleet_rows(root: PrefixNode, limit: int = MAX_FLEET_ROWS) -> list[FleetRow]:
    """The trie as lines, depth first; a node with one child held by the same replicas continues on
    the same line (a run of blocks), so a long shared prompt is one line."""
    rows: list[FleetRow] = []
    stack = [(child, "", "") for child in reversed(list(root.children.values()))]
    while stack and len(rows) < limit:
        node, line, under = stack.pop()
        blocks, first = 1, node
        while len(node.children) == 1:
            (only,) = node.children.values()
            if only.holders != node.holders:
                break
            node, blocks = only, blocks + 1
        body = first.text if first.text is not None else "[" + " ".join(map(str, first.tokens)) + "]"
        rows.append(FleetRow(line, body, blocks, frozenset(first.holders)))
        kids = list(node.children.values())
        for i in reversed(range(len(kids))):
            last = i == len(kids) - 1
            stack.append((kids[i], under + ("└ " if last else "├ "), under + ("  " if last else "│ ")))
    return rows


def fleet_text(replicas: Sequence[tuple[str, WatchState]], width: int) -> Text:
    """The fleet view: one line per run of shared blocks, and which replicas cache it."""
    names = [name for name, _ in replicas]
    rows = fleet_rows(fleet_tree(replicas))
    out = Text(no_wrap=True, overflow="ellipsis")
    out.append(" ".join(names) + "  cached prefixes (matched by tokens), a mark per replica holding them", style="bold")
    if not rows:
        out.append("\nno replica has a full block cached yet (or no KV events arrive)", style=DIM)
    for row in rows:
        out.append("\n")
        for name in names:
            out.append("● " if name in row.holders else "· ", style=HELD_STYLE if name in row.holders else DIM)
        out.append(row.prefix, style=DIM)
        count = f" ({row.blocks} blocks)" if row.blocks > 1 else ""
        room = max(8, width - 2 * len(names) - len(row.prefix) - len(count) - 2)
        body = repr(row.text.replace("\n", "⏎"))[1:-1]
        out.append(body if len(body) <= room else body[: room - 1] + "…")
        out.append(count, style=DIM)
    return out


def replica_text(name: str, state: WatchState, width: int) -> Text:
    """One replica in a few lines: links, queues, KV, hit rate, TTFT."""
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f"{name} ", style="bold").append(state.url)
    text.append("  ● ", style=LINK_STYLES[state.link]).append(f"/metrics {state.link}")
    text.append("  ● ", style=LINK_STYLES[state.kv_link]).append(f"KV events {state.kv_link}")
    s = state.latest
    if s is None:
        return text.append(f"\n{state.link_error or 'reading /metrics…'}", style=DIM)
    kv = s.per_engine(m.KV_USAGE)
    reasons = state.waiting_by_reason()
    waiting = f"waiting {s.total(m.WAITING) or 0:.0f}"
    if reasons.get("capacity"):
        waiting += f" ({reasons['capacity']:.0f} for capacity)"
    text.append(f"\nrunning {s.total(m.RUNNING) or 0:.0f} · {waiting} · KV {100 * max(kv.values(), default=0):.0f}%")
    cached = sum(c.num_cached for c in state.caches.ranks.values())
    text.append(f" · {cached} blocks cached · hits {pct(state.hit_rate(True))}")
    text.append(f" · TTFT mean {duration(state.latency(m.TTFT, 'TTFT').window_mean)}")
    return text


def _path(cache: RankCache, key: BlockKey) -> list[BlockKey] | None:
    """The chain from its first block to `key` (None: some block before it is not shown)."""
    path = [key]
    block = cache.blocks[key]
    while block.parent is not None:
        if block.parent not in cache.blocks:
            return None
        path.append(block.parent)
        block = cache.blocks[block.parent]
    return path[::-1]
