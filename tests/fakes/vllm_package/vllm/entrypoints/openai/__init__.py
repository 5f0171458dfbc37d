"""Stand-in vLLM OpenAI server."""
