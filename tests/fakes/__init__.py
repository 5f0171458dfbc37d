"""Stand-ins the tests share: the scripted model runner (fixed tokens, no compute), the engine under the
dashboard's tests built on it, the one fake vLLM server, and a stand-in `vllm` package that runs it."""
