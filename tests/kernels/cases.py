"""Inputs shared by the kernel tests of every backend (C++ and Triton) against the torch reference."""

from dataclasses import dataclass

import torch

from enginetui.kernels.paged_batch import PagedBatch
from enginetui.kernels.reference import paged_attention_ref

# Attention cases every backend is tested on: (q_lens, seq_lens, num_heads, num_kv_heads, head_size, block_size)
ATTENTION_CASES = {
    "decode": ([1, 1, 1, 1, 1], [1, 16, 17, 40, 77], 4, 2, 16, 16),
    "prefill": ([23, 16], [23, 16], 4, 4, 16, 16),
    "chunk_with_history": ([9], [50], 4, 1, 16, 32),
    "mixed_odd": ([1, 13, 1, 33, 2], [29, 13, 64, 70, 5], 4, 2, 16, 16),
    "many_blocks": ([1, 20, 1], [300, 200, 150], 2, 2, 16, 16),
    "gqa_group3": ([1, 7, 1], [33, 20, 9], 6, 2, 16, 32),
    "gqa_group32": ([1, 3], [18, 40], 32, 1, 16, 16),
    "head64": ([1, 17, 1], [45, 30, 16], 4, 2, 64, 16),
    "head128": ([1, 5], [40, 37], 2, 1, 128, 32),
    "head80": ([1, 6, 1], [37, 22, 5], 4, 2, 80, 16),  # not powers of two: padded and masked by Triton
    "head96": ([2, 1], [19, 33], 2, 1, 96, 16),
    "block8": ([1, 9, 1], [40, 30, 17], 4, 2, 16, 8),
    "block1": ([1, 3], [20, 7], 4, 2, 16, 1),
    # 45 tokens x 4 grouped heads: items of 32 rows across tokens, the last one part-filled, over history
    "long_chunk_gqa": ([45, 1], [90, 30], 8, 2, 64, 16),
}

# K/V write cases: (dtype of the step's keys and values, dtype of the cache, block_size)
KV_WRITE_CASES = [
    (torch.float32, torch.float32, 16),
    (torch.float16, torch.float16, 32),
    (torch.bfloat16, torch.bfloat16, 16),
    (torch.float32, torch.bfloat16, 32),
    (torch.float32, torch.float16, 8),
]

NUM_TOKENS, NUM_KV_HEADS, NUM_BLOCKS = 11, 3, 5  # the write case's shape
PADDING_TOKENS = [0, 4, 10]  # rows of the write case whose slot is -1: never written


@dataclass
class KVWrite:
    """One step's keys and values to write into NaN-poisoned caches, and a copy of the caches for the reference."""

    key: torch.Tensor  # [num_tokens, num_kv_heads, head_size] strided view of a fused qkv tensor
    value: torch.Tensor  # [num_tokens, num_kv_heads, head_size] strided view
    slot_mapping: torch.Tensor  # [num_tokens] flat cache slot of each token, -1 for padding
    key_cache: torch.Tensor  # [num_blocks, block_size, num_kv_heads, head_size] all NaN: for the kernel
    value_cache: torch.Tensor  # same shape
    key_ref: torch.Tensor  # a clone of key_cache: for the reference
    value_ref: torch.Tensor  # a clone of value_cache

    def written_slots(self) -> list[int]:
        """Slots the kernel wrote (no NaN left in them), sorted."""
        written = (~self.key_cache.isnan()).all(dim=(2, 3)).flatten().nonzero().flatten()  # [num_written]
        return sorted(written.tolist())

    def expected_slots(self) -> list[int]:
        """Slots the step should write, sorted."""
        return sorted(self.slot_mapping[self.slot_mapping >= 0].tolist())


def kv_write(key_dtype: torch.dtype, cache_dtype: torch.dtype, block_size: int, head_size: int) -> KVWrite:
    gen = torch.Generator().manual_seed(1)
    qkv = torch.randn(NUM_TOKENS, 3, NUM_KV_HEADS, head_size, generator=gen).to(key_dtype)
    slot_mapping = torch.randperm(NUM_BLOCKS * block_size, generator=gen)[:NUM_TOKENS]  # [num_tokens]
    slot_mapping[PADDING_TOKENS] = -1
    cache_shape = (NUM_BLOCKS, block_size, NUM_KV_HEADS, head_size)
    key_cache = torch.full(cache_shape, float("nan"), dtype=cache_dtype)
    value_cache = torch.full(cache_shape, float("nan"), dtype=cache_dtype)
    return KVWrite(qkv[:, 1], qkv[:, 2], slot_mapping, key_cache, value_cache, key_cache.clone(), value_cache.clone())


def take_step_kv_out(batch: PagedBatch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """For a batch with q_lens [4, 1] and seq_lens [10, 21]: this step's K/V taken back out of the
    cache and their slots poisoned, so a kernel step must write them before attending.

    Returns (key, value, slots, expected): key/value [num_tokens, num_kv_heads, head_size], slots
    [num_tokens] flat cache slots, expected [num_tokens, num_heads, head_size] the reference attention.
    """
    positions = torch.cat([torch.arange(6, 10), torch.tensor([20])])  # [num_tokens] the new tokens' positions
    req = torch.tensor([0, 0, 0, 0, 1])  # [num_tokens]
    block_size = batch.key_cache.shape[1]
    slots = batch.block_table[req, positions // block_size].long() * block_size + positions % block_size
    flat_k, flat_v = batch.key_cache.flatten(0, 1), batch.value_cache.flatten(0, 1)  # [num_slots, kv_heads, head]
    key, value = flat_k[slots].clone(), flat_v[slots].clone()  # [num_tokens, num_kv_heads, head_size]
    expected = paged_attention_ref(*batch.args(*batch.clean_caches()))
    flat_k[slots] = float("nan")
    flat_v[slots] = float("nan")
    return key, value, slots, expected


def slice_query_out_of_qkv(batch: PagedBatch) -> None:
    """Make the batch's query a strided view into a fused qkv tensor, as the model hands it over."""
    num_tokens, num_heads, head_size = batch.query.shape
    qkv = torch.randn(num_tokens, 3 * num_heads * head_size)  # [num_tokens, 3 * num_heads * head_size]
    qkv[:, : num_heads * head_size] = batch.query.reshape(num_tokens, -1)
    batch.query = qkv[:, : num_heads * head_size].view(num_tokens, num_heads, head_size)  # strided view
