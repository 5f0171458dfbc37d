"""Command-line flags shared by several commands, one module per purpose: the engine's (vLLM's names),
the live dashboards' and `--record`."""
