"""Triton kernel: write each new token's K and V into its slot of the paged cache.

Same contract as `enginetui.kernels.reference.reshape_and_cache_ref`: cache layout
`[num_blocks, block_size, num_kv_heads, head_size]`, slot = block * block_size + offset,
and a slot < 0 means "do not write this token".
"""

import torch
import triton
import triton.language as tl

from enginetui.kernels.launch import Launch


@triton.jit
def _reshape_and_cache_kernel(
    key_ptr,  # [num_tokens, num_kv_heads, head_size]
    value_ptr,  # [num_tokens, num_kv_heads, head_size]
    key_cache_ptr,  # [num_blocks, block_size, num_kv_heads, head_size]
    value_cache_ptr,  # [num_blocks, block_size, num_kv_heads, head_size]
    slot_mapping_ptr,  # [num_tokens]
    stride_k_tok,
    stride_k_head,
    stride_k_dim,
    stride_v_tok,
    stride_v_head,
    stride_v_dim,
    stride_c_block,  # the four cache strides, shared by key_cache and value_cache
    stride_c_off,
    stride_c_head,
    stride_c_dim,
    BLOCK_SIZE: tl.constexpr,  # tokens per cache block
    HEAD_SIZE: tl.constexpr,
    NUM_KV_HEADS: tl.constexpr,
    ROW: tl.constexpr,  # next power of two >= NUM_KV_HEADS * HEAD_SIZE
):
    """One program per token: copy its `[num_kv_heads, head_size]` K and V rows into the slot."""
    tok = tl.program_id(0).to(tl.int64)
    slot = tl.load(slot_mapping_ptr + tok).to(tl.int64)
    if slot < 0:
        return
    block = slot // BLOCK_SIZE
    offset = slot % BLOCK_SIZE

    offs = tl.arange(0, ROW)  # [ROW] flat (head, dim) index
    head = offs // HEAD_SIZE  # [ROW]
    dim = offs % HEAD_SIZE  # [ROW]
    valid = offs < NUM_KV_HEADS * HEAD_SIZE  # [ROW]

    k = tl.load(key_ptr + tok * stride_k_tok + head * stride_k_head + dim * stride_k_dim, mask=valid)  # [ROW]
    v = tl.load(value_ptr + tok * stride_v_tok + head * stride_v_head + dim * stride_v_dim, mask=valid)  # [ROW]
    dst = block * stride_c_block + offset * stride_c_off + head * stride_c_head + dim * stride_c_dim  # [ROW]
    tl.store(key_cache_ptr + dst, k.to(key_cache_ptr.dtype.element_ty), mask=valid)
    tl.store(value_cache_ptr + dst, v.to(value_cache_ptr.dtype.element_ty), mask=valid)


def reshape_and_cache_triton(
    key: torch.Tensor,  # [num_tokens, num_kv_heads, head_size]
    value: torch.Tensor,  # [num_tokens, num_kv_heads, head_size]
    key_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_size]
    value_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_size]
    slot_mapping: torch.Tensor,  # [num_tokens] int32/int64; < 0 means "do not write"
) -> None:
    """Write each token's K and V into its slot of the paged cache (one kernel launch)."""
    launch = reshape_and_cache_launch(key, value, key_cache, value_cache, slot_mapping)
    if launch is not None:
        launch.run()


def reshape_and_cache_launch(key, value, key_cache, value_cache, slot_mapping) -> Launch | None:
    """The launch `reshape_and_cache_triton` makes (same arguments), or None for no tokens."""
    num_tokens, num_kv_heads, head_size = key.shape
    _, block_size, _, _ = key_cache.shape
    if key_cache.stride() != value_cache.stride():
        raise ValueError("key_cache and value_cache must have the same strides")
    if num_tokens == 0:
        return None
    args = (key, value, key_cache, value_cache, slot_mapping, *key.stride(), *value.stride(), *key_cache.stride())
    meta = dict(
        BLOCK_SIZE=block_size,
        HEAD_SIZE=head_size,
        NUM_KV_HEADS=num_kv_heads,
        ROW=triton.next_power_of_2(num_kv_heads * head_size),
    )
    return Launch(_reshape_and_cache_kernel, (num_tokens,), args, meta)
