"""POST /v1/completions: prompts -> engine requests -> one JSON answer or a stream of chunks.

One engine request per prompt: `cmpl-<base>` for a single prompt (the answer's id, so a
dashboard row and a client's answer carry the same id), `cmpl-<base>-<i>` for prompt i of a
batch (vLLM's names). Choice `i * n + j` is completion j of prompt i. Chunks and bodies follow
vLLM 0.32's serving_completion.
"""

import time

import msgspec
from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse

from enginetui.core.entrypoints.openai.completion_protocol import (
    CompletionRequest,
    CompletionResponse,
    CompletionResponseChoice,
    CompletionResponseStreamChoice,
    CompletionStreamResponse,
)
from enginetui.core.entrypoints.openai.errors import APIError, bad_request
from enginetui.core.entrypoints.openai.logprobs import completion_logprobs
from enginetui.core.entrypoints.openai.protocol import UsageInfo
from enginetui.core.entrypoints.openai.served_model import ServedModel, request_id_base
from enginetui.core.entrypoints.openai.streaming import SSE_DONE, ChoiceDelta, EngineStreams, sse, until_disconnected
from enginetui.core.sampling_params import SamplingParams


async def create_completion(served: ServedModel, req: CompletionRequest, raw: Request):
    served.check_request(req, req.model)
    if req.echo and req.logprobs is not None:
        raise bad_request("echo with logprobs is not supported (it needs prompt logprobs)", "echo")
    prompts = req.prompts()
    token_ids = [served.tokenize(p, req.add_special_tokens) for p in prompts]
    params = [
        req.sampling_params(served.output_limit(len(ids), req.max_tokens), req.logprobs, served.default_sampling)
        for ids in token_ids
    ]
    request_id = f"cmpl-{request_id_base(raw, req.request_id)}"
    echoed = [p if isinstance(p, str) else served.decode(p) for p in prompts] if req.echo else None
    streams = EngineStreams(
        lambda i: served.engine.generate(
            token_ids[i], params[i], engine_request_id(request_id, i, len(prompts)), req.priority
        ),
        len(prompts),
    )
    answer = _Answer(served, req, params, request_id, echoed)
    try:
        await until_disconnected(raw, streams.start())
        if req.stream:
            return StreamingResponse(answer.chunks(streams), media_type="text/event-stream")
        return JSONResponse(answer.whole(await until_disconnected(raw, streams.final())).model_dump())
    except BaseException:
        await streams.close()
        raise


_JSON = msgspec.json.Encoder()  # compact, non-ASCII as UTF-8, as pydantic's model_dump_json


def engine_request_id(request_id: str, index: int, count: int) -> str:
    """The engine's id for prompt `index` of `count`: the answer's id itself for a single prompt."""
    return request_id if count == 1 else f"{request_id}-{index}"


class _Answer:
    """Builds the answer of one completion request from its engine outputs."""

    def __init__(
        self,
        served: ServedModel,
        req: CompletionRequest,
        params: list[SamplingParams],
        request_id: str,
        echoed: list[str] | None,
    ) -> None:
        self.served = served  # the model and its tokenizer
        self.req = req  # the request
        self.params = params  # sampling parameters per prompt
        self.id = request_id  # cmpl-<base>
        self.created = int(time.time())  # the answer's timestamp
        self.echoed = echoed  # per prompt, text to put before the completion (echo=True)

    def whole(self, finals) -> CompletionResponse:
        choices: list[CompletionResponseChoice] = []
        prompt_tokens, completion_tokens = 0, 0
        for i, out in enumerate(finals):
            prompt_tokens += len(out.prompt_token_ids)
            for c in out.outputs:
                completion_tokens += len(c.token_ids)
                logprobs = None
                if self.req.logprobs is not None:
                    logprobs = completion_logprobs(c.token_ids, c.logprobs, self.req.logprobs, self.served.tokenizer)
                text = (self.echoed[i] if self.echoed else "") + c.text
                choices.append(
                    CompletionResponseChoice(
                        index=len(choices),
                        text=text,
                        logprobs=logprobs,
                        finish_reason=c.finish_reason,
                        stop_reason=self.served.stop_reason(c, self.params[i]),
                        prompt_token_ids=out.prompt_token_ids if self.req.return_token_ids else None,
                        token_ids=c.token_ids if self.req.return_token_ids else None,
                    )
                )
        return CompletionResponse(
            id=self.id,
            created=self.created,
            model=self.served.name,
            choices=choices,
            usage=UsageInfo.of(prompt_tokens, completion_tokens),
        )

    async def chunks(self, streams: EngineStreams):
        n = self.req.n
        final_usage, continuous_usage = self.req.usage_in_stream()
        plain = self.req.logprobs is None and not continuous_usage
        token_ids = bool(self.req.return_token_ids)
        deltas: dict[int, ChoiceDelta] = {}
        prompt_tokens: dict[int, int] = {}
        try:
            try:
                async for i, out in streams.outputs():
                    prompt_tokens[i] = len(out.prompt_token_ids)
                    for c in out.outputs:
                        index = i * n + c.index
                        choice = deltas.get(index)
                        if choice is None:
                            choice = deltas[index] = ChoiceDelta.for_params(self.params[i])
                        first = choice.sent_tokens == 0 and choice.sent_text == 0
                        delta = choice.advance(c)
                        if delta is None:
                            continue
                        text = (self.echoed[i] if self.echoed and first else "") + delta.text
                        stop_reason = self.served.stop_reason(c, self.params[i]) if delta.finish_reason else None
                        if plain:
                            ids = (delta.token_ids, out.prompt_token_ids if first else None) if token_ids else None
                            yield self._plain_chunk(index, text, delta.finish_reason, stop_reason, ids)
                            continue
                        logprobs = None
                        if self.req.logprobs is not None:
                            logprobs = completion_logprobs(
                                delta.token_ids,
                                delta.logprobs,
                                self.req.logprobs,
                                self.served.tokenizer,
                                delta.text_offset,
                            )
                        sent = CompletionResponseStreamChoice(
                            index=index,
                            text=text,
                            logprobs=logprobs,
                            finish_reason=delta.finish_reason,
                            stop_reason=stop_reason,
                        )
                        if self.req.return_token_ids:
                            sent.token_ids = delta.token_ids
                            if first:
                                sent.prompt_token_ids = out.prompt_token_ids
                        chunk = self._chunk([sent])
                        if continuous_usage:
                            chunk.usage = UsageInfo.of(prompt_tokens[i], choice.sent_tokens)
                        yield sse(chunk.model_dump_json(exclude_unset=True))
                if final_usage:
                    usage = UsageInfo.of(sum(prompt_tokens.values()), sum(d.sent_tokens for d in deltas.values()))
                    chunk = self._chunk([], usage)
                    yield sse(chunk.model_dump_json(exclude_none=True))
            except APIError as exc:
                yield sse(exc.body().model_dump_json())
            yield SSE_DONE
        finally:
            await streams.close()

    def _plain_chunk(
        self,
        index: int,
        text: str,
        finish_reason: str | None,
        stop_reason: str | int | None,
        ids: tuple[list[int], list[int] | None] | None,
    ) -> bytes:
        """The event of a chunk of one choice without logprobs or usage: the bytes of
        `sse(self._chunk([choice]).model_dump_json(exclude_unset=True))` without building the models
        (nearly every chunk of a stream is one). `ids`: with return_token_ids, the chunk's tokens and,
        on the choice's first chunk, the prompt's."""
        choice: dict = {
            "index": index,
            "text": text,
            "logprobs": None,
            "finish_reason": finish_reason,
            "stop_reason": stop_reason,
        }
        if ids is not None:
            tokens, prompt = ids
            if prompt is not None:
                choice["prompt_token_ids"] = prompt
            choice["token_ids"] = tokens
        chunk = {
            "id": self.id,
            "object": "text_completion",
            "created": self.created,
            "model": self.served.name,
            "choices": [choice],
        }
        return b"data: " + _JSON.encode(chunk) + b"\n\n"

    def _chunk(self, choices, usage: UsageInfo | None = None) -> CompletionStreamResponse:
        chunk = CompletionStreamResponse(
            id=self.id, object="text_completion", created=self.created, model=self.served.name, choices=choices
        )
        if usage is not None:
            chunk.usage = usage
        return chunk
