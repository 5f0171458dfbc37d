"""Attention metadata reaches attention layers through a scoped forward context, not layer signatures.

The context belongs to the thread that runs the forward pass: engines on threads of one process
(in-process EngineCores) each see only their own.
"""

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch


@dataclass(slots=True)
class AttentionMetadata:
    """Where each new token's K/V goes (per token) and what each request reads (per block)."""

    slot_mapping: torch.Tensor  # [num_tokens] int64 cache slot for each new token's K/V
    query_start_loc: torch.Tensor  # [num_reqs + 1] int32 prefix sum of tokens per request
    seq_lens: torch.Tensor  # [num_reqs] int32 context length after this step
    block_table: torch.Tensor  # [num_reqs, max_blocks] int32 logical -> physical block ids
    backend: str | None = None  # attention kernels (kernels.dispatch.BACKENDS), chosen once per runner; None: by device
    max_query_len: int | None = (
        None  # longest query of the step, in tokens (picks the Triton query tile); None: unknown
    )
    prompt_split: "PromptSplit | None" = None  # whole prompts apart from the rest (kernels.prompt_sdpa); None: one call


@dataclass(slots=True)
class PromptSplit:
    """A step's attention in two parts: the prompts computed from their first token, each a causal attention over
    its own new keys (kernels.prompt_attention), and every other request through the paged kernel."""

    spans: list[tuple[int, int]]  # [start, end) tokens of each whole prompt
    rest_tokens: slice | torch.Tensor  # the other requests' tokens: a range, or [num_rest_tokens] int64 indices
    rest: AttentionMetadata | None  # their query_start_loc, seq_lens, block_table (None: no other request)


class _ThreadContext(threading.local):
    """The forward context of the current thread."""

    current: AttentionMetadata | None = None  # metadata of the forward running on this thread


_context = _ThreadContext()


@contextmanager
def set_forward_context(metadata: AttentionMetadata) -> Iterator[None]:
    """Install `metadata` on this thread for the duration of one model forward, then restore the previous one."""
    previous, _context.current = _context.current, metadata
    try:
        yield
    finally:
        _context.current = previous


def get_forward_context() -> AttentionMetadata:
    current = _context.current
    if current is None:
        raise RuntimeError("attention called outside set_forward_context() on this thread")
    return current
