"""`enginetui bench ...`: throughput, latency and step-profile benchmarks of the engine.

`enginetui/cli.py` registers `enginetui.bench.cli.add_bench_subparsers`; each subcommand's module
is imported only when it runs, so building the parser stays cheap. Importing this package
imports nothing else.
"""
