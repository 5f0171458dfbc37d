"""The engine's per-token logprobs as the completions and chat APIs show them (vLLM's rules).

The engine gives, per generated token, `{token_id: logprob}` with the sampled token first and
then the top candidates (a dict, so the sampled token appears once even when it is among them).
Completions list the sampled token plus `logprobs` candidates; chat lists the first
`top_logprobs` entries. -inf becomes -9999.0, as OpenAI and vLLM send it.
"""

from enginetui.core.entrypoints.openai.chat_protocol import (
    ChatCompletionLogProb,
    ChatCompletionLogProbs,
    ChatCompletionLogProbsContent,
)
from enginetui.core.entrypoints.openai.completion_protocol import CompletionLogProbs

FLOOR = -9999.0  # the lowest logprob sent (JSON has no -inf)


def token_text(tokenizer, token_id: int) -> str:
    """One token's text; `token_id:N` without a tokenizer (vLLM's placeholder)."""
    return f"token_id:{token_id}" if tokenizer is None else tokenizer.decode([token_id])


def completion_logprobs(
    token_ids: list[int], logprobs: list[dict[int, float]], num_top: int, tokenizer, text_offset: int = 0
) -> CompletionLogProbs:
    """Logprobs of these tokens; `text_offset` is where the first one's text starts in the choice text."""
    offsets: list[int] = []
    tokens: list[str] = []
    token_logprobs: list[float | None] = []
    top_logprobs: list[dict[str, float] | None] = []
    for token_id, step in zip(token_ids, logprobs, strict=True):
        token = token_text(tokenizer, token_id)
        offsets.append(text_offset)
        tokens.append(token)
        token_logprobs.append(max(step.get(token_id, FLOOR), FLOOR))
        top_logprobs.append(
            {
                token_text(tokenizer, tid): max(lp, FLOOR)
                for rank, (tid, lp) in enumerate(step.items())
                if rank <= num_top
            }
        )
        text_offset += len(token)
    return CompletionLogProbs(
        text_offset=offsets, tokens=tokens, token_logprobs=token_logprobs, top_logprobs=top_logprobs
    )


def chat_logprobs(
    token_ids: list[int], logprobs: list[dict[int, float]], num_top: int, tokenizer
) -> ChatCompletionLogProbs:
    content = []
    for token_id, step in zip(token_ids, logprobs, strict=True):
        token = token_text(tokenizer, token_id)
        top = [
            _chat_logprob(token_text(tokenizer, tid), lp)
            for rank, (tid, lp) in enumerate(step.items())
            if rank < num_top
        ]
        entry = _chat_logprob(token, step.get(token_id, FLOOR))
        content.append(ChatCompletionLogProbsContent(**entry.model_dump(), top_logprobs=top))
    return ChatCompletionLogProbs(content=content)


def _chat_logprob(token: str, logprob: float) -> ChatCompletionLogProb:
    return ChatCompletionLogProb(
        token=token, logprob=max(logprob, FLOOR), bytes=list(token.encode("utf-8", errors="replace"))
    )
