"""`enginetui bench ...`: throughput, latency and step-profile benchmarks of the engine.

`enginetui/cli.py` calls `add_bench_subparsers`; each subcommand's module is imported only
when it runs, so building the parser stays cheap.
"""

from enginetui.bench.cli import add_bench_subparsers

__all__ = ["add_bench_subparsers"]
