"""Attention metadata reaches attention layers through a scoped forward context, not layer signatures."""

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


_current: AttentionMetadata | None = None


@contextmanager
def set_forward_context(metadata: AttentionMetadata) -> Iterator[None]:
    """Install `metadata` for the duration of one model forward, then restore the previous one."""
    global _current
    previous, _current = _current, metadata
    try:
        yield
    finally:
        _current = previous


def get_forward_context() -> AttentionMetadata:
    if _current is None:
        raise RuntimeError("attention called outside set_forward_context()")
    return _current
