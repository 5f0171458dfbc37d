"""The flags of every command that opens a live dashboard (`enginetui`, `enginetui attach`)."""

import argparse

# Most redraws per second. Drawing the whole screen costs Textual about 10 ms of CPU at 160x50, and
# on a machine the engine keeps busy that time is taken from the engine: measured on the 2-core
# machine (quick workload, dashboard attached), 15 Hz kept 0.76x of the headless throughput, 10 Hz
# 0.83x, 6 Hz 0.90x. 10 Hz still moves smoothly; --redraw-hz changes it.
DEFAULT_REDRAW_HZ = 10.0
REDRAW_HZ_RANGE = (0.5, 60.0)  # the rates --redraw-hz accepts


def add_redraw_arg(parser: argparse.ArgumentParser) -> None:
    """--redraw-hz."""
    parser.add_argument("--redraw-hz", type=_redraw_hz, default=DEFAULT_REDRAW_HZ, metavar="HZ",
                        help=f"most dashboard redraws per second (default: {DEFAULT_REDRAW_HZ:g}); each costs CPU "
                             "time the engine may need when they share the cores")


def _redraw_hz(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of redraws per second, got {text!r}") from None
    low, high = REDRAW_HZ_RANGE
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"must be between {low:g} and {high:g}, got {text}")
    return value
