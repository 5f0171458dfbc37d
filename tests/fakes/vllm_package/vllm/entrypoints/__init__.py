"""Stand-in vLLM entry points."""
