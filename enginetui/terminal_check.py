"""The dashboards (`enginetui`, `enginetui attach`, `enginetui replay`, `enginetui simulate --watch`) draw on a
terminal: started without one (`enginetui | tail`, a cron job, a pipe into stdin) they say what to run
instead and stop, rather than write escape codes into a pipe or a file."""

import sys


def has_terminal() -> bool:
    """Both stdin (keys) and stdout (the screen) are a terminal."""
    return all(stream is not None and stream.isatty() for stream in (sys.stdin, sys.stdout))


# What to run instead, without a terminal: a live engine, a recording, a simulated run.
LIVE_INSTEAD = (
    "run `enginetui serve` (an OpenAI-compatible server) or use the Python API (`from enginetui.core import LLM`)"
)
REPLAY_INSTEAD = "`enginetui export FILE` writes the recording as a Perfetto trace (ui.perfetto.dev)"
SIMULATE_INSTEAD = "leave out --watch: the run's figures are printed when it ends"


def refuse_without_terminal(prog: str, instead: str = LIVE_INSTEAD) -> bool:
    """True (after one line on stderr saying what to run `instead`) when there is no terminal to draw on."""
    if has_terminal():
        return False
    print(
        f"{prog}: the dashboard needs a terminal (stdin and stdout are not both one); without a screen, {instead}",
        file=sys.stderr,
    )
    return True
