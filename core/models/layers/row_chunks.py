"""Running a row-wise block (an MLP) over a long batch a slice of rows at a time, on CPU.

An MLP over a whole prefill batch of 4,096 tokens writes its intermediate ([tokens, ffn], 48 MiB
for opt-125m) to memory and reads it back; over 1,024 rows at a time the intermediate stays in the
caches, which is faster. The result is the same up to summation order (the GEMMs block differently).
"""

from collections.abc import Callable

import torch

CHUNK_ROWS = 1024  # rows per slice
MIN_ROWS = 2 * CHUNK_ROWS  # batches shorter than this run at once


def by_row_chunks(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """fn(x) for a row-wise fn, x: [num_tokens, ...]; on CPU a slice of CHUNK_ROWS rows at a time
    when x has MIN_ROWS rows or more."""
    if not x.is_cpu or x.shape[0] < MIN_ROWS:
        return fn(x)
    return torch.cat([fn(part) for part in x.split(CHUNK_ROWS)])
