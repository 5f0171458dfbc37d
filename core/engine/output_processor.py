"""Client-side output processing: detokenize, apply stop strings, assemble RequestOutputs
(folding the samples of an n > 1 request back into one, core/engine/parallel_sampling.py).

Every engine output is detokenized as it comes; under a stream interval above 1 (the engine's
--stream-interval, or a request's own) a request's RequestOutput is passed on only every that many
tokens, its first and last at once, as vLLM's OutputProcessor does: fewer outputs for the caller
(a server's chunks) to handle, each carrying several tokens."""

import time
from dataclasses import dataclass

import msgspec

from enginetui.core.engine.detokenizer import (
    FastIncrementalDetokenizer,
    IncrementalDetokenizer,
    detokenizer_for,
    find_stop,
)
from enginetui.core.engine.parallel_sampling import ParentRequest
from enginetui.core.outputs import CompletionOutput, EngineCoreOutput, EngineCoreRequest, RequestMetrics, RequestOutput
from enginetui.core.sampling_params import SamplingParams


@dataclass(slots=True)
class RequestState:
    """What the client keeps for one live request."""

    request_id: str  # the request
    prompt: str | None  # prompt text, if given as text
    prompt_token_ids: list[int]  # tokenized prompt
    params: SamplingParams  # its sampling parameters
    detok: FastIncrementalDetokenizer | IncrementalDetokenizer  # text assembly
    metrics: RequestMetrics  # timings
    logprobs: list[dict[int, float]] | None  # per generated token, when asked for
    num_cached_tokens: int = 0  # prefix-cache hits reported by the engine
    cumulative_logprob: float = 0.0  # sum of the sampled tokens' logprobs (reported when logprobs are asked for)
    parent: ParentRequest | None = None  # the n > 1 request this is one sample of
    index: int = 0  # which sample (0 when n == 1)
    stream_interval: int = 1  # new tokens an output carries at least (the first and the last go at once)
    sent_tokens: int = 0  # tokens generated when the latest output was passed on


class OutputProcessor:
    """Folds EngineCoreOutputs into per-request RequestOutputs."""

    def __init__(self, tokenizer, stream: bool, stream_interval: int = 1) -> None:
        self.tokenizer = tokenizer  # HF tokenizer or None
        self.stream = stream  # n > 1: pass on every sample's progress (True) or only the final aggregate
        self.stream_interval = stream_interval  # the engine's --stream-interval; a request's own may raise it
        self.states: dict[str, RequestState] = {}  # live engine requests by id
        self.parents: dict[str, ParentRequest] = {}  # live n > 1 requests by the caller's id

    def register(self, request: EngineCoreRequest, prompt: str | None) -> list[EngineCoreRequest]:
        """Track a preprocessed request; returns what to send to EngineCore (its n samples when n > 1)."""
        params = request.sampling_params
        if params.n == 1:
            self._add_state(request.request_id, prompt, request, params, None, 0)
            return [request]
        parent = ParentRequest(request.request_id, params, self.stream)
        self.parents[request.request_id] = parent
        children = []
        for index, (child_id, child_params) in enumerate(parent.children()):
            child = msgspec.structs.replace(request, request_id=child_id, sampling_params=child_params)
            self._add_state(child_id, prompt, child, child_params, parent, index)
            children.append(child)
        return children

    def _add_state(
        self,
        request_id: str,
        prompt: str | None,
        request: EngineCoreRequest,
        params: SamplingParams,
        parent: ParentRequest | None,
        index: int,
    ) -> None:
        self.states[request_id] = RequestState(
            request_id=request_id,
            prompt=prompt,
            prompt_token_ids=request.prompt_token_ids,
            params=params,
            detok=detokenizer_for(self.tokenizer, params.skip_special_tokens),
            metrics=RequestMetrics(arrival_time=request.arrival_time),
            logprobs=[] if params.logprobs is not None else None,
            parent=parent,
            index=index,
            stream_interval=max(self.stream_interval, params.stream_interval or 1),
        )

    def is_live(self, request_id: str) -> bool:
        """True while the caller's request (one engine request, or the n samples of one) is running."""
        return request_id in self.states or request_id in self.parents

    def engine_ids(self, request_id: str) -> list[str]:
        """The engine requests behind a caller's request id (its samples when n > 1)."""
        parent = self.parents.get(request_id)
        return parent.child_ids() if parent is not None else [request_id]

    def forget(self, request_id: str) -> None:
        """Drop a caller's request (it was abandoned); its engine requests must be aborted by the caller."""
        for engine_id in self.engine_ids(request_id):
            self.states.pop(engine_id, None)
        self.parents.pop(request_id, None)

    def has_unfinished(self) -> bool:
        return bool(self.states)

    def process(self, outputs: list[EngineCoreOutput]) -> tuple[list[RequestOutput], list[str]]:
        """RequestOutputs for these engine outputs, and ids the engine must abort (stop strings)."""
        results, to_abort = [], []
        now = time.time()
        for out in outputs:
            state = self.states.get(out.request_id)
            if state is None:
                continue  # already finished on this side (stop string) or unknown
            result, stopped = self._process_one(state, out, now)
            if stopped:
                to_abort.append(out.request_id)
            if result is None:
                continue  # its tokens go with a later output (outputs are cumulative)
            if result.finished:
                del self.states[out.request_id]
            result = self._fold(state, result)
            if result is not None:
                results.append(result)
        return results, to_abort

    def _fold(self, state: RequestState, result: RequestOutput) -> RequestOutput | None:
        """One sample's output as its parent's (n > 1), or as is."""
        parent = state.parent
        if parent is None:
            return result
        folded = parent.fold(state.request_id, state.index, result)
        if folded is not None and folded.finished:
            self.parents.pop(parent.request_id, None)
        return folded

    def _process_one(self, state: RequestState, out: EngineCoreOutput, now: float) -> tuple[RequestOutput | None, bool]:
        """Take in one engine output: (the request's output, or None when it is not due under its stream
        interval; whether a stop string ended it here)."""
        m = state.metrics
        if out.first_scheduled_time is not None and m.first_scheduled_time is None:
            m.first_scheduled_time = out.first_scheduled_time
        state.num_cached_tokens = out.num_cached_tokens or state.num_cached_tokens
        stop_reason: str | int | None  # the stop token, or the stop string found below
        finish_reason, stop_reason, error = out.finish_reason, out.stop_token_id, None
        if out.finish_reason in ("rejected", "error"):
            error = out.finish_detail
        new_text = ""
        stopped_by_string = False
        if out.new_token_ids:
            if m.first_token_time is None:
                m.first_token_time = now
            m.last_token_time = now
            new_text = state.detok.add(out.new_token_ids)
            if out.new_logprobs and state.logprobs is not None:
                for entries in out.new_logprobs:
                    state.logprobs.append({e.token_id: e.logprob for e in entries})
                    state.cumulative_logprob += entries[0].logprob  # the sampled token comes first
            if state.params.stop and new_text:
                hit = find_stop(
                    state.detok.text, len(new_text), state.params.stop, state.params.include_stop_str_in_output
                )
                if hit is not None:
                    stop, cut = hit
                    kept_before = len(state.detok.text) - len(new_text)
                    state.detok.text = state.detok.text[:cut]
                    new_text = state.detok.text[kept_before:] if cut > kept_before else ""
                    stopped_by_string = out.finish_reason is None
                    finish_reason, stop_reason = "stop", stop
        finished = finish_reason is not None
        if finished:
            m.finished_time = now
        elif not _due(state):
            return None, False  # not built: under a stream interval most outputs are not passed on
        completion = CompletionOutput(
            index=state.index,
            text=state.detok.text,
            token_ids=list(state.detok.token_ids),
            finish_reason=finish_reason,
            stop_reason=stop_reason,
            logprobs=list(state.logprobs) if state.logprobs is not None else None,
            error=error,
            cumulative_logprob=state.cumulative_logprob if state.logprobs is not None else None,
        )
        result = RequestOutput(
            request_id=state.request_id,
            prompt=state.prompt,
            prompt_token_ids=state.prompt_token_ids,
            outputs=[completion],
            finished=finished,
            metrics=m,
            num_cached_tokens=state.num_cached_tokens,
            new_text=new_text,
        )
        return result, stopped_by_string

    def fail_all(self, reason: str) -> list[RequestOutput]:
        """Final error outputs for every live request (the engine died)."""
        now = time.time()
        results = []
        for state in list(self.states.values()):
            state.metrics.finished_time = now
            completion = CompletionOutput(
                index=state.index,
                text=state.detok.text,
                token_ids=list(state.detok.token_ids),
                finish_reason="error",
                logprobs=state.logprobs,
                error=reason,
                cumulative_logprob=state.cumulative_logprob if state.logprobs is not None else None,
            )
            result = self._fold(
                state,
                RequestOutput(
                    state.request_id,
                    state.prompt,
                    state.prompt_token_ids,
                    [completion],
                    True,
                    state.metrics,
                    state.num_cached_tokens,
                ),
            )
            if result is not None:
                results.append(result)
        self.states.clear()
        self.parents.clear()
        return results


def _due(state: RequestState) -> bool:
    """Whether an unfinished request's output goes out now, under its stream interval (vLLM's rule:
    its first output, then once `stream_interval` tokens came since the last one passed on)."""
    if state.stream_interval == 1:
        return True
    tokens = len(state.detok.token_ids)
    if state.sent_tokens and tokens - state.sent_tokens < state.stream_interval:
        return False
    state.sent_tokens = tokens
    return True
