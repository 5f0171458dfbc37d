"""Running a request's engine streams for an HTTP answer: fan-in, first output, disconnects, deltas.

- `EngineStreams` runs one AsyncLLM.generate() per prompt (several: each in its own task) and
  merges their outputs. `start()` waits for every prompt's first output, so whatever the engine refuses
  (invalid input, a prompt that can never fit the KV pool) becomes an error status before any
  byte of the answer is sent; `close()` cancels (or closes) what is left, which aborts those requests.
- `until_disconnected()` runs a wait that is cancelled as soon as the client goes away.
- `ChoiceDelta` turns one choice's cumulative output into what is new since the last chunk,
  holding back the text a stop string could still take back (as vLLM's detokenizer does).
"""

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from typing import TypeVar

from fastapi import Request

from enginetui.core.engine.errors import EngineDeadError
from enginetui.core.entrypoints.openai.errors import APIError, ClientDisconnected, bad_request, internal_error
from enginetui.core.outputs import CompletionOutput, RequestOutput
from enginetui.core.sampling_params import SamplingParams

T = TypeVar("T")


async def until_disconnected(request: Request, wait: Awaitable[T]) -> T:
    """Await `wait`; if the client disconnects first, cancel it and raise ClientDisconnected."""
    work = asyncio.ensure_future(wait)
    watch = asyncio.ensure_future(_disconnect(request))
    try:
        await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not work.done():
            work.cancel()
            await asyncio.gather(work, return_exceptions=True)
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)
    if work.cancelled():
        raise ClientDisconnected()
    return work.result()


async def _disconnect(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


class EngineStreams:
    """One engine request per prompt, merged; yields (prompt index, cumulative RequestOutput).

    Several prompts' streams are each read by a task of their own into one queue; a single prompt's
    stream (nearly every request) is read directly where its outputs are consumed: no task and no
    queue between the engine's output and the chunk, two task switches a chunk fewer."""

    def __init__(self, generate: Callable[[int], AsyncGenerator[RequestOutput, None]], count: int) -> None:
        self._count = count  # prompts
        self._single = generate(0) if count == 1 else None  # the one prompt's stream, read in place
        # (prompt index, RequestOutput, or the stream's error, or None: the stream ended)
        self._queue: asyncio.Queue[tuple[int, RequestOutput | Exception | None]] = asyncio.Queue()
        self._tasks = (
            []
            if self._single is not None
            else [  # one per prompt
                asyncio.create_task(self._pump(i, generate(i))) for i in range(count)
            ]
        )
        self._first: list[tuple[int, RequestOutput]] = []  # outputs read by start(), replayed by outputs()
        self._live = count  # streams not yet ended

    async def start(self) -> None:
        """Wait until every prompt has its first output; raise APIError if the engine refused one."""
        waiting = set(range(self._count))
        while waiting:
            index, item = await self._next()
            if item is None:
                waiting.discard(index)
                continue
            _check_succeeded(item)
            self._first.append((index, item))
            waiting.discard(index)

    async def outputs(self) -> AsyncIterator[tuple[int, RequestOutput]]:
        """Every output after start(), in arrival order; raises APIError if a request failed."""
        first, self._first = self._first, []
        for pair in first:
            yield pair
        while self._live:
            index, item = await self._next()
            if item is not None:
                _check_succeeded(item)
                yield index, item

    async def final(self) -> list[RequestOutput]:
        """Each prompt's last output, carrying the last state of every one of its completions, in
        prompt order (with n > 1 an output may carry only the completion that advanced)."""
        last: dict[int, RequestOutput] = {}
        completions: dict[int, dict[int, CompletionOutput]] = {}
        async for index, out in self.outputs():
            last[index] = out
            for c in out.outputs:
                completions.setdefault(index, {})[c.index] = c
        return [replace(last[i], outputs=[completions[i][j] for j in sorted(completions[i])]) for i in sorted(last)]

    async def close(self) -> None:
        """Cancel the streams still running: their requests are aborted in the engine."""
        if self._single is not None:
            await self._single.aclose()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _next(self) -> tuple[int, RequestOutput | None]:
        """The next (prompt index, output, or None: that stream ended), as a pump would have queued it;
        the single stream is read here directly (no coroutine between it and the chunk)."""
        item: RequestOutput | Exception | None
        if self._single is None:
            index, item = await self._queue.get()
        else:
            index = 0
            try:
                item = await anext(self._single)
            except StopAsyncIteration:
                item = None
            except Exception as exc:  # noqa: BLE001 - the engine's error, answered as an APIError below
                item = exc
        if item is None:
            self._live -= 1
        elif isinstance(item, BaseException):
            raise _as_api_error(item)
        return index, item

    async def _pump(self, index: int, stream: AsyncIterator[RequestOutput]) -> None:
        try:
            async for out in stream:
                self._queue.put_nowait((index, out))
        except Exception as exc:  # noqa: BLE001 - handed to the reader, which answers with it
            self._queue.put_nowait((index, exc))
        self._queue.put_nowait((index, None))


def _as_api_error(exc: BaseException) -> APIError:
    if isinstance(exc, APIError):
        return exc
    if isinstance(exc, ValueError):  # the engine's own validation of the prompt or its parameters
        return bad_request(str(exc))
    if isinstance(exc, EngineDeadError):
        return internal_error(f"the engine is not running: {exc}")
    return internal_error(f"{type(exc).__name__}: {exc}")


def _check_succeeded(out: RequestOutput) -> None:
    """Refused at admission (e.g. it can never fit the KV pool) is the client's fault, a 400;
    failed in the engine is a 500."""
    for c in out.outputs:
        if c.finish_reason == "rejected":
            raise bad_request(f"The engine rejected the request: {c.error}")
        if c.finish_reason == "error":
            raise internal_error(f"The request failed in the engine: {c.error}")


@dataclass(slots=True)
class Delta:
    """What one chunk of one choice carries."""

    text: str  # text added
    token_ids: list[int]  # tokens added
    logprobs: list[dict[int, float]] | None  # their logprobs (when asked for)
    text_offset: int  # where `text` starts in the choice's whole text
    finish_reason: str | None  # set on the last chunk
    stop_reason: str | int | None  # what stopped it, on the last chunk


@dataclass(slots=True)
class ChoiceDelta:
    """What has been sent of one choice so far."""

    holdback: int  # characters a stop string could still take back (longest stop - 1, or 0)
    sent_text: int = 0  # characters of text sent
    sent_tokens: int = 0  # tokens sent
    finished: bool = False  # the last chunk was sent

    @classmethod
    def for_params(cls, params: SamplingParams) -> "ChoiceDelta":
        stops = params.stop or []
        hold = max((len(s) for s in stops), default=1) - 1 if not params.include_stop_str_in_output else 0
        return cls(holdback=hold)

    def advance(self, c: CompletionOutput) -> Delta | None:
        """The new part of `c` (cumulative), or None when there is nothing to send."""
        if self.finished:
            return None
        done = c.finish_reason is not None
        upto = len(c.text) if done else max(self.sent_text, len(c.text) - self.holdback)
        text = c.text[self.sent_text : upto]
        tokens = c.token_ids[self.sent_tokens :]
        if not text and not tokens and not done:
            return None
        logprobs = c.logprobs[self.sent_tokens : len(c.token_ids)] if c.logprobs is not None else None
        delta = Delta(
            text=text,
            token_ids=list(tokens),
            logprobs=logprobs,
            text_offset=self.sent_text,
            finish_reason=c.finish_reason,
            stop_reason=c.stop_reason if done else None,
        )
        self.sent_text, self.sent_tokens, self.finished = upto, len(c.token_ids), done
        return delta


def sse(payload: str) -> str:
    """One server-sent event carrying a JSON payload."""
    return f"data: {payload}\n\n"


SSE_DONE = "data: [DONE]\n\n"  # the stream's last event
