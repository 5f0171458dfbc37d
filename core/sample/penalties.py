"""Presence, frequency and repetition penalties, and min_tokens blocking, applied to logits in place."""

import torch

from enginetui.core.sample.metadata import SamplingMetadata


def apply_penalties(logits: torch.Tensor, meta: SamplingMetadata) -> None:
    """logits: [num_rows, vocab] float32, modified in place.

    repetition: a seen (prompt or output) token's logit is divided by p if positive, multiplied if negative.
    frequency:  logit -= f * (times the token was generated).
    presence:   logit -= p if the token was generated at all.
    """
    if meta.presence_penalty is None or meta.frequency_penalty is None or meta.repetition_penalty is None:
        return  # no row uses penalties (the three are set together)
    num_rows, vocab = logits.shape
    counts = torch.zeros(num_rows, vocab, dtype=logits.dtype, device=logits.device)  # [num_rows, vocab]
    seen = torch.zeros(num_rows, vocab, dtype=torch.bool, device=logits.device)  # [num_rows, vocab]
    for row, (out_ids, prompt_ids) in enumerate(zip(meta.output_token_ids, meta.prompt_token_ids)):
        if out_ids:
            ids = torch.tensor(out_ids, device=logits.device)  # [num_out]
            counts[row].index_add_(0, ids, torch.ones(len(out_ids), dtype=logits.dtype, device=logits.device))
        if prompt_ids:
            seen[row, torch.tensor(prompt_ids, device=logits.device)] = True
    seen |= counts > 0
    rep = meta.repetition_penalty[:, None].expand_as(logits)  # [num_rows, vocab]
    penalized = torch.where(logits > 0, logits / rep, logits * rep)
    logits.copy_(torch.where(seen, penalized, logits))
    logits -= meta.frequency_penalty[:, None] * counts
    logits -= meta.presence_penalty[:, None] * (counts > 0).to(logits.dtype)


def apply_min_tokens(logits: torch.Tensor, meta: SamplingMetadata) -> None:
    """Forbid EOS and stop tokens for rows that have not yet generated min_tokens."""
    for row, blocked in enumerate(meta.min_tokens_blocked):
        if blocked:
            logits[row, blocked] = float("-inf")
