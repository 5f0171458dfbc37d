"""Recording a benchmark: `--record FILE` and the `record` events mode, which measures what
recording costs (the engine's events written to a file by LLM(record=...) as the run goes)."""

import argparse
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def add_record_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--record",
        metavar="FILE",
        help="record every step event of our engine to FILE (replay it with `enginetui replay "
        "FILE`); with throughput, the engine of the `record` events mode (the default "
        "mode then)",
    )


def event_modes(args: argparse.Namespace) -> list[str]:
    """The events modes asked for: --events, else `record` with --record, else `on`."""
    modes = list(dict.fromkeys(args.events or (["record"] if args.record else ["on"])))
    if args.record and "record" not in modes:
        raise ValueError(
            f"--record {args.record} records the `record` events mode: add it to --events "
            f"(--events {' '.join(modes)} record)"
        )
    return modes


@contextmanager
def record_path(args: argparse.Namespace, modes: list[str]) -> Iterator[str | None]:
    """Where the `record` mode writes: --record FILE, else a temporary file removed afterwards
    (None when no mode records)."""
    if "record" not in modes:
        yield None
    elif args.record:
        yield args.record
    else:
        with tempfile.TemporaryDirectory(prefix="enginetui-bench-") as tmp:
            yield str(Path(tmp) / "bench.etrec")
