"""Client-side output processing: detokenize, apply stop strings, assemble RequestOutputs."""

import time
from dataclasses import dataclass

from core.engine.detokenizer import IncrementalDetokenizer, find_stop
from core.outputs import CompletionOutput, EngineCoreOutput, RequestMetrics, RequestOutput
from core.sampling_params import SamplingParams


@dataclass(slots=True)
class RequestState:
    """What the client keeps for one live request."""

    request_id: str  # the request
    prompt: str | None  # prompt text, if given as text
    prompt_token_ids: list[int]  # tokenized prompt
    params: SamplingParams  # its sampling parameters
    detok: IncrementalDetokenizer  # text assembly
    metrics: RequestMetrics  # timings
    logprobs: list[dict[int, float]] | None  # per generated token, when asked for
    num_cached_tokens: int = 0  # prefix-cache hits reported by the engine


class OutputProcessor:
    """Folds EngineCoreOutputs into per-request RequestOutputs."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer  # HF tokenizer or None
        self.states: dict[str, RequestState] = {}  # live requests by id

    def add_request(self, request_id: str, prompt: str | None, prompt_token_ids: list[int],
                    params: SamplingParams, arrival_time: float) -> None:
        self.states[request_id] = RequestState(
            request_id=request_id, prompt=prompt, prompt_token_ids=prompt_token_ids, params=params,
            detok=IncrementalDetokenizer(self.tokenizer, params.skip_special_tokens),
            metrics=RequestMetrics(arrival_time=arrival_time),
            logprobs=[] if params.logprobs is not None else None,
        )

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
            if result.finished:
                del self.states[out.request_id]
            results.append(result)
        return results, to_abort

    def _process_one(self, state: RequestState, out: EngineCoreOutput, now: float) -> tuple[RequestOutput, bool]:
        m = state.metrics
        if out.first_scheduled_time is not None and m.first_scheduled_time is None:
            m.first_scheduled_time = out.first_scheduled_time
        state.num_cached_tokens = out.num_cached_tokens or state.num_cached_tokens
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
            if state.params.stop and new_text:
                hit = find_stop(state.detok.text, len(new_text), state.params.stop, state.params.include_stop_str_in_output)
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
        completion = CompletionOutput(
            index=0, text=state.detok.text, token_ids=list(state.detok.token_ids), finish_reason=finish_reason,
            stop_reason=stop_reason, logprobs=list(state.logprobs) if state.logprobs is not None else None,
            error=error,
        )
        result = RequestOutput(
            request_id=state.request_id, prompt=state.prompt, prompt_token_ids=state.prompt_token_ids,
            outputs=[completion], finished=finished, metrics=m, num_cached_tokens=state.num_cached_tokens,
            new_text=new_text,
        )
        return result, stopped_by_string

    def fail_all(self, reason: str) -> list[RequestOutput]:
        """Final error outputs for every live request (the engine died)."""
        now = time.time()
        results = []
        for state in self.states.values():
            state.metrics.finished_time = now
            completion = CompletionOutput(
                index=0, text=state.detok.text, token_ids=list(state.detok.token_ids), finish_reason="error",
                logprobs=state.logprobs, error=reason,
            )
            results.append(RequestOutput(state.request_id, state.prompt, state.prompt_token_ids, [completion],
                                         True, state.metrics, state.num_cached_tokens))
        self.states.clear()
        return results
