"""The flags of every command that opens a live dashboard (`enginetui`, `enginetui attach`)."""

import argparse

# Most redraws per second. Drawing the whole screen costs Textual about 10 ms of CPU at 160x50, and
# on a machine the engine keeps busy that time is taken from the engine: measured on the 2-core
# machine (quick workload, dashboard attached), 15 Hz kept 0.76x of the headless throughput, 10 Hz
# 0.83x, 6 Hz 0.90x. 10 Hz still moves smoothly; --redraw-hz changes it.
DEFAULT_REDRAW_HZ = 10.0
REDRAW_HZ_RANGE = (0.5, 60.0)  # the rates --redraw-hz accepts
# Most of one core the dashboard may use (enginetui/dashboard/redraw_pacer.py). A full 160x50 screen of 64
# running requests costs about 14 ms a frame on that machine, on top of ~4% of a core for the
# events: at 10 Hz the dashboard took 17-19% of a core and left the engine 0.84x of its headless
# throughput (mixed workload, dashboard attached), at 4 Hz 9-10% and 0.92x; under 8% it took 7%,
# drew about twice a second through that run and left the engine 0.95x. Light screens (a few
# requests) cost less a frame and still draw at --redraw-hz.
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
