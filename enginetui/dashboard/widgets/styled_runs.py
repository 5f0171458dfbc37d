"""Appending many short styled pieces (grid cells, timeline cells) to a Rich Text in few spans.

Textual draws a line span by span: a span per one-character cell made the pool grid and the
timeline slow to draw (a replay frame's timeline at 160x50: 43 ms, 8 ms in runs).
"""

from collections.abc import Iterable

from rich.text import Text


def append_runs(text: Text, pieces: Iterable[tuple[str, str]]) -> Text:
    """Append (string, style) pieces to `text`, consecutive pieces of one style as one span; returns `text`."""
    run, run_style = "", ""  # consecutive pieces of one style, not yet appended
    for piece, style in pieces:
        if style != run_style and run:
            text.append(run, style=run_style)
            run = ""
        run, run_style = run + piece, style
    return text.append(run, style=run_style)
