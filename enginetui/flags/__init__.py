"""Command-line flags shared by several commands, one module per purpose: the engine's (vLLM's names),
the live dashboards', `--record` and the traces `simulate` and `bench serve` read."""
