"""POST /v1/chat/completions: messages -> chat template -> one engine request -> answer or stream.

The engine request id is `chatcmpl-<base>`. A stream opens each choice with a chunk carrying
the role, then content deltas, the finish reason on each choice's last chunk, and the usage
chunk when asked for, as vLLM 0.32's serving_chat does.
"""

import time

from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse

from enginetui.core.entrypoints.openai.chat_protocol import (
    ChatCompletionRequest,
    ChatCompletionResponse,
    ChatCompletionResponseChoice,
    ChatCompletionResponseStreamChoice,
    ChatCompletionStreamResponse,
    ChatMessage,
    DeltaMessage,
)
from enginetui.core.entrypoints.openai.chat_template import render_chat
from enginetui.core.entrypoints.openai.errors import APIError
from enginetui.core.entrypoints.openai.logprobs import chat_logprobs
from enginetui.core.entrypoints.openai.protocol import UsageInfo
from enginetui.core.entrypoints.openai.served_model import ServedModel, request_id_base
from enginetui.core.entrypoints.openai.streaming import SSE_DONE, ChoiceDelta, EngineStreams, sse, until_disconnected
from enginetui.core.sampling_params import SamplingParams

RESPONSE_ROLE = "assistant"  # the role of generated messages (vLLM's --response-role default)


async def create_chat_completion(served: ServedModel, req: ChatCompletionRequest, raw: Request):
    served.check_request(req, req.model)
    prompt = render_chat(
        served.tokenizer, req.messages, req.add_generation_prompt, req.continue_final_message, req.chat_template_kwargs
    )
    token_ids = served.tokenize(prompt, req.add_special_tokens)
    param = "max_completion_tokens" if req.max_completion_tokens is not None else "max_tokens"
    params = req.sampling_params(
        served.output_limit(len(token_ids), req.output_limit(), param), req.num_logprobs(), served.default_sampling
    )
    request_id = f"chatcmpl-{request_id_base(raw, req.request_id)}"
    streams = EngineStreams(lambda _: served.engine.generate(token_ids, params, request_id, req.priority), 1)
    answer = _Answer(served, req, params, request_id)
    try:
        await until_disconnected(raw, streams.start())
        if req.stream:
            return StreamingResponse(answer.chunks(streams), media_type="text/event-stream")
        (final,) = await until_disconnected(raw, streams.final())
        return JSONResponse(answer.whole(final).model_dump())
    except BaseException:
        await streams.close()
        raise


class _Answer:
    """Builds the answer of one chat request from its engine outputs."""

    def __init__(
        self, served: ServedModel, req: ChatCompletionRequest, params: SamplingParams, request_id: str
    ) -> None:
        self.served = served  # the model and its tokenizer
        self.req = req  # the request
        self.params = params  # its sampling parameters
        self.id = request_id  # chatcmpl-<base>
        self.created = int(time.time())  # the answer's timestamp
        self.role = RESPONSE_ROLE if req.add_generation_prompt else req.messages[-1]["role"]  # of the reply
        last = req.messages[-1]
        # echo=True: the reply starts with the last message's content when that message has the reply's role
        self.echoed = (last.get("content") or "") if req.echo and last.get("role") == self.role else ""

    def whole(self, final) -> ChatCompletionResponse:
        choices = []
        for c in final.outputs:
            logprobs = self._logprobs(c.token_ids, c.logprobs)
            choices.append(
                ChatCompletionResponseChoice(
                    index=c.index,
                    message=ChatMessage(role=self.role, content=self.echoed + c.text),
                    logprobs=logprobs,
                    finish_reason=c.finish_reason,
                    stop_reason=self.served.stop_reason(c, self.params),
                )
            )
        completion_tokens = sum(len(c.token_ids) for c in final.outputs)
        return ChatCompletionResponse(
            id=self.id,
            created=self.created,
            model=self.served.name,
            choices=choices,
            usage=UsageInfo.of(len(final.prompt_token_ids), completion_tokens),
        )

    async def chunks(self, streams: EngineStreams):
        final_usage, continuous_usage = self.req.usage_in_stream()
        deltas = [ChoiceDelta.for_params(self.params) for _ in range(self.req.n)]
        prompt_tokens = 0
        try:
            try:
                opened = False
                async for _, out in streams.outputs():
                    prompt_tokens = len(out.prompt_token_ids)
                    if not opened:  # each choice's first chunk names the role
                        opened = True
                        for i in range(self.req.n):
                            yield self._event(self._choice(i, DeltaMessage(role=self.role, content="")))
                            if self.echoed:
                                yield self._event(self._choice(i, DeltaMessage(content=self.echoed)))
                    for c in out.outputs:
                        delta = deltas[c.index].advance(c)
                        if delta is None:
                            continue
                        choice = self._choice(
                            c.index, DeltaMessage(content=delta.text), self._logprobs(delta.token_ids, delta.logprobs)
                        )
                        if delta.finish_reason is not None:
                            choice.finish_reason = delta.finish_reason
                            choice.stop_reason = self.served.stop_reason(c, self.params)
                        usage = UsageInfo.of(prompt_tokens, deltas[c.index].sent_tokens) if continuous_usage else None
                        yield self._event(choice, usage)
                if final_usage:
                    usage = UsageInfo.of(prompt_tokens, sum(d.sent_tokens for d in deltas))
                    chunk = ChatCompletionStreamResponse(
                        id=self.id, created=self.created, model=self.served.name, choices=[], usage=usage
                    )
                    yield sse(chunk.model_dump_json(exclude_unset=True, exclude_none=True))
            except APIError as exc:
                yield sse(exc.body().model_dump_json())
            yield SSE_DONE
        finally:
            await streams.close()

    def _choice(self, index: int, delta: DeltaMessage, logprobs=None) -> ChatCompletionResponseStreamChoice:
        return ChatCompletionResponseStreamChoice(index=index, delta=delta, logprobs=logprobs, finish_reason=None)

    def _event(self, choice: ChatCompletionResponseStreamChoice, usage: UsageInfo | None = None) -> str:
        chunk = ChatCompletionStreamResponse(
            id=self.id, object="chat.completion.chunk", created=self.created, model=self.served.name, choices=[choice]
        )
        if usage is not None:
            chunk.usage = usage
        return sse(chunk.model_dump_json(exclude_unset=True))

    def _logprobs(self, token_ids: list[int], logprobs):
        if self.params.logprobs is None:
            return None
        return chat_logprobs(token_ids, logprobs, self.req.top_logprobs or 0, self.served.tokenizer)
