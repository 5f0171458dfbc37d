"""CLI arguments for small, fast benchmark runs on the tiny model."""

import argparse

from enginetui.cli import build_parser

SMALL_ENGINE = ["--num-gpu-blocks-override", "64", "--device", "cpu"]  # a small pool keeps steps cheap
SMALL_WORKLOAD = ["--num-prompts", "5", "--min-input-len", "8", "--max-input-len", "40",
                  "--min-output-len", "3", "--max-output-len", "9"]  # fmt: skip


def bench_args(kind: str, model_dir: str, *extra: str) -> argparse.Namespace:
    """Parse `enginetui bench KIND --model DIR ...` with the real parser."""
    return build_parser().parse_args(["bench", kind, "--model", model_dir, *SMALL_ENGINE, *extra])
