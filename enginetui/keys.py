"""The dashboards' keys, defined once for the engine dashboard (and `enginetui attach`, the same app),
the vLLM watch, the replays and the fleet views (a replay's playback keys: enginetui/replay/controls.py).

Typing is typing: the prompt box has the focus from the start and takes every printable key as
text, so no action sits on a printable key. Actions are on keys text never uses: Ctrl+letter, F1,
PgUp / PgDn and the arrows. Replay takes no text, so it also answers to plain letters (`plain`:
its footer and help name those, the shorter).
"""

from collections.abc import Iterable

from textual.app import App
from textual.binding import Binding

# Said at the top of the help screen and (in other words) in the README and docs/dashboard.md.
TYPING_NOTE = (
    "Just type: every letter goes into the prompt box, Enter sends it. "
    "Actions are on Ctrl+letter, F1, PgUp/PgDn and the arrows."
)
# The requests panel's subtitle: its keys (not in the footer), short enough for 80 columns; a dashboard on
# a run that takes no input (a replay, a simulation) has only the first.
SELECT_HINT = "↑↓ select"
REQUEST_KEYS = f"{SELECT_HINT} · ^x abort · ^l clear"


def help_key(plain: bool = False) -> Binding:
    """F1 (and `?` where nothing is typed) opens the help screen; /help in the prompt box does too."""
    return Binding(
        "f1,question_mark" if plain else "f1",
        "help",
        "Help",
        key_display="?" if plain else "F1",
        tooltip="this screen: every key, what each panel shows" + ("" if plain else " (/help too)"),
    )


def quit_keys(what: str, plain: bool = False) -> list[Binding]:
    """Ctrl+Q (and `q` where nothing is typed) quits; Ctrl+C too, from any screen. `what`: what quitting does."""
    return [
        Binding("ctrl+q,q" if plain else "ctrl+q", "quit", "Quit", key_display="q" if plain else None, tooltip=what),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True, tooltip=f"{what} (from any screen)"),
    ]


def select_keys(how: str = " (or click it)") -> list[Binding]:
    """↑ and ↓ move the selection in the requests panel."""
    return [
        Binding("up", "select(-1)", "Select", show=False, tooltip=f"select the previous request{how}"),
        Binding("down", "select(1)", "Select", show=False, tooltip=f"select the next request{how}"),
    ]


def burst_key(what: str) -> Binding:
    return Binding("ctrl+b", "burst", "Burst", tooltip=what)


def abort_key(what: str) -> Binding:
    """Ctrl+X: before the prompt box's own Ctrl+X (cut), which a one-line prompt hardly needs."""
    return Binding("ctrl+x", "abort", "Abort", show=False, priority=True, tooltip=what)  # on the requests panel


CLEAR = Binding("ctrl+l", "clear", "Clear", show=False, tooltip="clear ended requests from the list")


# The control keys of a live engine, which a replay reads as play (^p), step (^s) and speed (PgDn / PgUp).
CONTROLS = "ctrl+p,ctrl+s,pagedown,pageup"
# A replay's play and speed keys where nothing is typed (controls.playback_keys).
PLAIN_PLAYBACK = "space,minus,plus"


def refused_keys(keys: str, tooltip: str) -> Binding:
    """Engine keys that a run taking no input (a replay, a simulated run) binds anyway, so that pressing one says
    why nothing happens (EngineTUI.action_refused) rather than nothing at all."""
    return Binding(keys, "refused", "Refused", show=False, tooltip=tooltip)


def key_rows(app: App, bindings: Iterable[Binding | tuple]) -> list[tuple[str, str]]:
    """The help screen's rows: each binding's key as the footer shows it, and what it does."""
    return [(app.get_key_display(b), b.tooltip or b.description) for b in bindings if isinstance(b, Binding)]


def timeline_key(plain: bool = False) -> Binding:
    return Binding(
        "ctrl+t,t" if plain else "ctrl+t",
        "toggle_timeline",
        "Timeline",
        show=plain,
        key_display="t" if plain else None,
        tooltip="show or hide the timeline: a lane per request, a column per engine step",
    )


# The engine dashboard's control keys (replay answers to them too: Ctrl+P plays, Ctrl+S steps).
PAUSE = Binding("ctrl+p", "pause", "Pause", tooltip="pause the engine (requests still arrive, and wait)")
RESUME = Binding("ctrl+p", "resume", "Resume", tooltip="resume a paused engine")
STEP = Binding("ctrl+s", "step", "Step", tooltip="run exactly one engine step (while paused)")
# Slow motion (replay: play speed) one level slower / faster. Bound with priority: the prompt box
# binds these keys too (to scroll, which a one-line box never does).
SLOWER = "pagedown"
FASTER = "pageup"
RESTART = Binding(
    "ctrl+r",
    "restart",
    "Restart",
    tooltip="after the engine died: start it again with the same settings (the request list stays)",
)
