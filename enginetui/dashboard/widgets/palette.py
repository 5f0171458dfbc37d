"""Colours of content inside panels (layout and frame styles live in app.tcss).

Every coloured thing also carries a word or glyph, so colour is never the only signal.
"""

# One colour per request (by order of first sight), shared by the requests list, queues and pool grid.
REQUEST_COLORS = (
    "#61afef", "#e5c07b", "#98c379", "#e06c75", "#c678dd", "#56b6c2",
    "#d19a66", "#82aaff", "#c3e88d", "#f78c6c", "#ff79c6", "#8be9fd",
)  # fmt: skip

STATUS_STYLES = {
    "sent": "#56b6c2",
    "waiting": "#e5c07b",
    "running": "bold #98c379",
    "preempted": "bold #e06c75",
    "finished": "#7f848e",
    "rejected": "bold #be5046",
    "aborted": "#d19a66",
    "error": "bold #be5046",
}

LOG_STYLES = {
    "admit": "#98c379",
    "chunk": "#56b6c2",
    "preempt": "bold #e06c75",
    "finish": "#7f848e",
    "abort": "#d19a66",
    "error": "bold #be5046",
    "reject": "bold #be5046",
}

DIM = "#5c6370"  # free cells, labels


def request_color(index: int) -> str:
    return REQUEST_COLORS[index % len(REQUEST_COLORS)]
