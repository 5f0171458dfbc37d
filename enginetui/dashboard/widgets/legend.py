"""Legends drawn inside a panel, and titles that fit its frame: every glyph on screen is explained,
and no word is cut mid-way (a panel picks the longest wording that fits, on purpose)."""

from collections.abc import Sequence

from rich.text import Text
from textual.widget import Widget

from enginetui.dashboard.widgets.palette import DIM

Entry = tuple[str, str, str]  # (glyph, its style, what it means)


def legend_lines(entries: Sequence[Entry], width: int) -> list[Text]:
    """`glyph meaning` entries in order, wrapped to `width` between entries (an entry wider than
    the panel gets a line of its own, cut at its end)."""
    lines: list[Text] = []
    line = Text(no_wrap=True, overflow="ellipsis")
    for glyph, style, meaning in entries:
        piece = len(glyph) + 1 + len(meaning)
        if len(line) and len(line) + 2 + piece > width:
            lines.append(line)
            line = Text(no_wrap=True, overflow="ellipsis")
        if len(line):
            line.append("  ")
        line.append(glyph, style=style).append(f" {meaning}", style=DIM)
    if len(line):
        lines.append(line)
    return lines


def title_room(widget: Widget) -> int:
    """Characters a title (or subtitle) gets on `widget`'s round border: `╭─ title ─╮`."""
    return max(0, widget.outer_size.width - 6)


def fitting(variants: Sequence[str], room: int) -> str:
    """The first of `variants` (longest, most complete first) that fits in `room` characters; the
    last one if none does (a size no layout is designed for: the frame cuts it)."""
    return next((v for v in variants if len(v) <= room), variants[-1])
