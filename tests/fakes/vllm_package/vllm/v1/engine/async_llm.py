import asyncio

from vllm import STARTED, PrefixCache, RequestOutput, complete


class AsyncLLM:
    """Streams each request's tokens one at a time."""

    def __init__(self):
        self.cache = PrefixCache()

    @classmethod
    def from_engine_args(cls, args):
        STARTED.append(args.kwargs)
        return cls()

    async def reset_prefix_cache(self):
        return self.cache.reset()

    async def generate(self, prompt, params, request_id):
        tokens = complete(prompt, params)
        cached = self.cache.lookup(prompt)
        for n in range(1, len(tokens) + 1):
            await asyncio.sleep(0)
            yield RequestOutput(tokens[:n], n == len(tokens), cached)

    def shutdown(self):
        pass
