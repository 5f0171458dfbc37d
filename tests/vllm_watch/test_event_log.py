"""The vLLM watch's event log: long lines shown whole."""

from enginetui.vllm_watch.panels import log_text
from enginetui.vllm_watch.state import WatchState


def test_the_event_log_shows_long_lines_whole():
    state = WatchState("http://h:1", None)
    long = "stored 4 blocks (128 tokens) under a parent of 3 blocks; the prefix tree now holds 40 of 64 blocks"
    state.note(0.0, "store", "short")
    state.note(1.0, "store", long)
    lines = log_text(state, 48, 5).plain.split("\n")
    assert lines[0].endswith("short") and all(len(line) <= 48 for line in lines)
    assert " ".join(line[17:].strip() for line in lines[1:]) == long  # time and kind, then every word
