"""The paged attention layer shared by every model: write K/V per token, read history per block."""

import torch
from torch import nn

from enginetui.core.worker.forward_context import AttentionMetadata, get_forward_context
from enginetui.kernels import paged_attention, prompt_attention, reshape_and_cache


class PagedAttention(nn.Module):
    """Attention over this layer's slice of the paged KV cache (bound by the model runner)."""

    def __init__(
        self, num_heads: int, num_kv_heads: int, head_size: int, scale: float, sliding_window: int | None = None
    ) -> None:
        super().__init__()
        self.num_heads = num_heads  # query heads
        self.num_kv_heads = num_kv_heads  # key/value heads (divides num_heads)
        self.head_size = head_size  # channels per head
        self.scale = scale  # softmax scale applied to q·k
        self.sliding_window = sliding_window  # keys a query sees, itself included (None: every earlier key)
        self.key_cache: torch.Tensor | None = None  # [num_blocks, block_size, num_kv_heads, head_size]
        self.value_cache: torch.Tensor | None = None  # [num_blocks, block_size, num_kv_heads, head_size]

    def bind_kv_cache(self, key_cache: torch.Tensor, value_cache: torch.Tensor) -> None:
        self.key_cache, self.value_cache = key_cache, value_cache

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """q: [num_tokens, num_heads * head_size]; k, v: [num_tokens, num_kv_heads * head_size]."""
        meta = get_forward_context()
        n = q.shape[0]
        q = q.view(n, self.num_heads, self.head_size)  # [num_tokens, num_heads, head_size]
        k = k.view(n, self.num_kv_heads, self.head_size)  # [num_tokens, num_kv_heads, head_size]
        v = v.view(n, self.num_kv_heads, self.head_size)  # [num_tokens, num_kv_heads, head_size]
        reshape_and_cache(k, v, self.key_cache, self.value_cache, meta.slot_mapping, backend=meta.backend)
        split = meta.prompt_split
        if split is None or self.sliding_window is not None:
            out = self._paged(q, meta)  # [num_tokens, num_heads, head_size]
        else:
            out = q.new_empty(n, self.num_heads, self.head_size)
            for start, end in split.spans:
                prompt_attention(q[start:end], k[start:end], v[start:end], self.scale, out[start:end])
            if split.rest is not None:
                rest = split.rest_tokens
                if isinstance(rest, slice):
                    self._paged(q[rest], split.rest, out=out[rest])
                else:
                    out[rest] = self._paged(q[rest], split.rest)
        return out.view(n, self.num_heads * self.head_size)

    def _paged(self, q: torch.Tensor, meta: AttentionMetadata, out: torch.Tensor | None = None) -> torch.Tensor:
        return paged_attention(
            q,
            self.key_cache,
            self.value_cache,
            meta.query_start_loc,
            meta.seq_lens,
            meta.block_table,
            self.scale,
            out=out,
            sliding_window=self.sliding_window,
            backend=meta.backend,
            max_query_len=meta.max_query_len,
        )  # [num_tokens, num_heads, head_size]
