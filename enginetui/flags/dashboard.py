"""The flags of every command that opens a live dashboard (`enginetui`, `enginetui attach`)."""

import argparse

# On a machine the engine keeps busy, the dashboard's CPU is taken from the engine: these defaults
# (most redraws per second, most of one core: enginetui/dashboard/redraw_pacer.py) still move smoothly
# and leave the engine most of its throughput (docs/speed.md, "The dashboard", has the figures).
DEFAULT_REDRAW_HZ = 10.0
REDRAW_HZ_RANGE = (0.5, 60.0)  # the rates --redraw-hz accepts
DEFAULT_MAX_CPU_PCT = 8.0


def add_redraw_args(parser: argparse.ArgumentParser) -> None:
    """--redraw-hz and --max-cpu."""
    parser.add_argument(
        "--redraw-hz",
        type=_redraw_hz,
        default=DEFAULT_REDRAW_HZ,
        metavar="HZ",
        help=f"most dashboard redraws per second (default: {DEFAULT_REDRAW_HZ:g}); each costs CPU "
        "time the engine may need when they share the cores",
    )
    parser.add_argument(
        "--max-cpu",
        type=_max_cpu,
        default=DEFAULT_MAX_CPU_PCT,
        metavar="PCT",
        help=f"most of one core the dashboard may use, in percent (default: {DEFAULT_MAX_CPU_PCT:g}; "
        "0: no limit): busy screens redraw less often than --redraw-hz to stay under it, "
        "at least once a second",
    )


def positive_int(text: str) -> int:
    """An argparse type: a whole number above 0 (--burst-size)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _max_cpu(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a percentage of one core, got {text!r}") from None
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"must be between 0 and 100, got {text}")
    return value


def _redraw_hz(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of redraws per second, got {text!r}") from None
    low, high = REDRAW_HZ_RANGE
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"must be between {low:g} and {high:g}, got {text}")
    return value
