import asyncio

from vllm import STARTED, RequestOutput, complete


class AsyncLLM:
    """Streams each request's tokens one at a time."""

    @classmethod
    def from_engine_args(cls, args):
        STARTED.append(args.kwargs)
        return cls()

    async def generate(self, prompt, params, request_id):
        tokens = complete(prompt, params)
        for n in range(1, len(tokens) + 1):
            await asyncio.sleep(0)
            yield RequestOutput(tokens[:n], n == len(tokens))

    def shutdown(self):
        pass
