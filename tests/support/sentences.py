"""Sentences the typing tests type: one for every key any dashboard ever had (and the replay's plain
keys), each starting with it."""

SENTENCES = (
    "quick brown fox",
    "bytes are cheap",
    "step by step",
    "clear skies",
    "xylophones ring",
    "tell me more",
    "restart the story",
    "is it raining",
    "go on",
    " leading space",
    "- a list item",
    "+1 to that",
    "= equals",
    "? what is this",
    ". dot",
    ", comma",
    "/slash is a command only on Enter",
    "Quit Ctrl",
    "B is a letter",
)
