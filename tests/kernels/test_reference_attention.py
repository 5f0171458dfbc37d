"""The torch reference against plain dense causal attention, one request and one head at a time."""

import pytest
import torch

from enginetui.kernels.paged_batch import make_paged_batch
from enginetui.kernels.reference import paged_attention_ref, reshape_and_cache_ref


def dense_attention(batch, window: int | None = None) -> torch.Tensor:
    """Naive float64 attention: each query over its request's keys 0..position (the last `window`
    of them with a window), via the block table."""
    key_cache, value_cache = batch.clean_caches()
    num_tokens, num_heads, head_size = batch.query.shape
    block_size, num_kv_heads = key_cache.shape[1], key_cache.shape[2]
    group = num_heads // num_kv_heads
    out = torch.zeros(num_tokens, num_heads, head_size, dtype=torch.float64)  # [num_tokens, num_heads, head]
    qsl = batch.query_start_loc.tolist()
    for r, seq_len in enumerate(batch.seq_lens.tolist()):
        blocks = batch.block_table[r, torch.arange(seq_len) // block_size].long()  # [seq_len]
        offsets = torch.arange(seq_len) % block_size  # [seq_len]
        k = key_cache[blocks, offsets].double()  # [seq_len, num_kv_heads, head_size]
        v = value_cache[blocks, offsets].double()  # [seq_len, num_kv_heads, head_size]
        q_len = qsl[r + 1] - qsl[r]
        for i in range(q_len):
            pos = seq_len - q_len + i
            for h in range(num_heads):
                q = batch.query[qsl[r] + i, h].double()  # [head_size]
                first = 0 if window is None else max(0, pos + 1 - window)
                scores = k[first : pos + 1, h // group] @ q * batch.scale  # [pos + 1 - first]
                out[qsl[r] + i, h] = scores.softmax(0) @ v[first : pos + 1, h // group]
    return out


CASES = {  # (q_lens, seq_lens, num_heads, num_kv_heads, block_size, head_size, sliding_window)
    "decode": ([1, 1, 1], [1, 17, 40], 4, 2, 16, 16, None),
    "prefill": ([23], [23], 4, 4, 16, 16, None),
    "two_prefills": ([5, 12], [5, 12], 4, 4, 32, 16, None),
    "chunk_with_history": ([9], [50], 6, 2, 16, 16, None),
    "mixed": ([1, 13, 1, 33, 2], [29, 13, 64, 70, 5], 4, 1, 16, 16, None),
    "head80": ([1, 7], [30, 12], 2, 1, 16, 80, None),
    "head96": ([3, 1], [3, 20], 2, 2, 8, 96, None),
    "window-mixed": ([1, 13, 1, 33, 2], [29, 13, 64, 70, 5], 4, 2, 16, 16, 9),
    "window-1": ([4, 1], [10, 3], 2, 1, 16, 32, 1),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_reference_matches_dense_attention(case):
    q_lens, seq_lens, num_heads, num_kv_heads, block_size, head_size, window = case
    batch = make_paged_batch(
        q_lens, seq_lens, num_heads=num_heads, num_kv_heads=num_kv_heads, block_size=block_size, head_size=head_size
    )
    out = torch.full_like(batch.query, float("nan"))  # [num_tokens, num_heads, head_size]
    returned = paged_attention_ref(*batch.args(*batch.clean_caches()), out=out, sliding_window=window)
    assert returned is out
    torch.testing.assert_close(out.double(), dense_attention(batch, window), rtol=1e-5, atol=1e-5)


def test_reference_empty_batch():
    batch = make_paged_batch([1], [3])
    empty = batch.query[:0]  # [0, num_heads, head_size]
    out = paged_attention_ref(
        empty,
        *batch.clean_caches(),
        torch.zeros(1, dtype=torch.int32),
        batch.seq_lens[:0],
        batch.block_table[:0],
        batch.scale,
    )
    assert out.shape == empty.shape


def test_reshape_and_cache_ref_skips_negative_slots():
    key = torch.arange(3 * 2 * 4, dtype=torch.float32).view(3, 2, 4)  # [num_tokens, num_kv_heads, head_size]
    key_cache = torch.full((2, 4, 2, 4), float("nan"))  # [num_blocks, block_size, num_kv_heads, head_size]
    value_cache = torch.full((2, 4, 2, 4), float("nan"))
    reshape_and_cache_ref(key, -key, key_cache, value_cache, torch.tensor([5, -1, 0]))
    assert torch.equal(key_cache[1, 1], key[0]) and torch.equal(value_cache[0, 0], -key[2])
    assert key_cache.isnan().sum() == (8 - 2) * 2 * 4
