"""MeteredEngine.generate closed early (a client that left) closes the engine's own stream at once,
so the request is aborted then, not whenever the garbage collector gets to it."""

import asyncio

from enginetui.core.entrypoints.openai.metrics import MeteredEngine, RequestSeen


class FakeEngine:
    """Just what MeteredEngine uses: output observers and a generate() that says when it ended."""

    def __init__(self) -> None:
        self.output_observers = []  # MeteredEngine adds the metrics' observer
        self.ended: list[str] = []  # request ids whose stream ran its finally

    async def generate(self, prompt, params, request_id, priority=0):
        try:
            for i in range(100):
                yield i
                await asyncio.sleep(0)
        finally:
            self.ended.append(request_id)


class FakeMetrics:
    def observe_engine_outputs(self, outputs) -> None: ...

    def observe_output(self, seen: RequestSeen, out) -> None: ...


def test_closing_the_metered_stream_closes_the_engines_at_once():
    engine = FakeEngine()
    metered = MeteredEngine(engine, FakeMetrics())

    async def leave_after_two():
        stream = metered.generate("p", None, "r1")
        seen = [await anext(stream), await anext(stream)]
        await stream.aclose()
        return seen, list(engine.ended)  # before this task gives the loop a turn

    seen, ended_at_close = asyncio.run(leave_after_two())
    assert seen == [0, 1] and ended_at_close == ["r1"] and metered.open == set()
