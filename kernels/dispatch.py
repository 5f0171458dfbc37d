"""Choose the kernel implementation for a tensor's device, or the one forced by env var."""

import os

import torch

from kernels.reference import paged_attention_ref, reshape_and_cache_ref

BACKEND_ENV = "ENGINETUI_ATTENTION_BACKEND"


def select_backend(device: torch.device) -> str:
    """`triton` or `torch`: the forced choice if the env var is set, else by device type."""
    forced = os.environ.get(BACKEND_ENV, "").strip().lower()
    if forced in ("torch", "triton"):
        return forced
    if forced:
        raise ValueError(f"{BACKEND_ENV} must be 'torch' or 'triton', got {forced!r}")
    return "triton" if device.type == "cuda" else "torch"


def reshape_and_cache(key, value, key_cache, value_cache, slot_mapping) -> None:
    """Write new K/V per token into `slot_mapping` slots (see kernels.reference)."""
    if select_backend(key.device) == "triton":
        from kernels.triton_reshape_and_cache import reshape_and_cache_triton

        reshape_and_cache_triton(key, value, key_cache, value_cache, slot_mapping)
    else:
        reshape_and_cache_ref(key, value, key_cache, value_cache, slot_mapping)


def paged_attention(query, key_cache, value_cache, query_start_loc, seq_lens, block_table, scale, out=None):
    """Varlen paged attention for a mixed prefill/decode batch (see kernels.reference)."""
    if select_backend(query.device) == "triton":
        from kernels.triton_paged_attention import paged_attention_triton

        return paged_attention_triton(
            query, key_cache, value_cache, query_start_loc, seq_lens, block_table, scale, out=out
        )
    return paged_attention_ref(query, key_cache, value_cache, query_start_loc, seq_lens, block_table, scale, out=out)
