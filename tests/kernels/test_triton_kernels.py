"""The Triton kernels against the torch reference, under TRITON_INTERPRET=1 on CPU (see conftest)."""

import pytest
import torch

from kernels.paged_batch import REL_TOL, make_paged_batch, max_rel_error
from kernels.reference import paged_attention_ref, reshape_and_cache_ref
from kernels.triton_paged_attention import paged_attention_triton
from kernels.triton_reshape_and_cache import reshape_and_cache_triton

DTYPES = [torch.float32, torch.float16, torch.bfloat16]

# (q_lens, seq_lens, num_heads, num_kv_heads, head_size, block_size)
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
    "head80": ([1, 6, 1], [37, 22, 5], 4, 2, 80, 16),  # not powers of two: padded and masked
    "head96": ([2, 1], [19, 33], 2, 1, 96, 16),
    "block8": ([1, 9, 1], [40, 30, 17], 4, 2, 16, 8),
    "block1": ([1, 3], [20, 7], 4, 2, 16, 1),
}


# Every case in every dtype, except the long one in fp32 only (the interpreter is slow).
ATTENTION_PARAMS = [
    pytest.param(case, dtype, id=f"{name}-{str(dtype).removeprefix('torch.')}")
    for name, case in ATTENTION_CASES.items()
    for dtype in (DTYPES if name != "many_blocks" else [torch.float32])
]


@pytest.mark.parametrize("case,dtype", ATTENTION_PARAMS)
def test_paged_attention_matches_reference(case, dtype):
    q_lens, seq_lens, num_heads, num_kv_heads, head_size, block_size = case
    batch = make_paged_batch(
        q_lens, seq_lens, num_heads=num_heads, num_kv_heads=num_kv_heads,
        head_size=head_size, block_size=block_size, dtype=dtype,
    )
    out = torch.full_like(batch.query, float("nan"))  # [num_tokens, num_heads, head_size]
    assert paged_attention_triton(*batch.args(), out=out) is out  # on the poisoned caches
    expected = paged_attention_ref(*batch.args(*batch.clean_caches()))  # [num_tokens, num_heads, head_size]
    assert max_rel_error(out, expected) < REL_TOL[dtype]


@pytest.mark.parametrize("tile_n,block_size", [(64, 16), (32, 32), (128, 8)])
def test_paged_attention_tile_variants_match_reference(tile_n, block_size):
    """Inner steps spanning several blocks (or one): only the speed may change."""
    batch = make_paged_batch([1, 13, 1, 40], [29, 13, 130, 95], num_heads=4, num_kv_heads=2,
                             head_size=16, block_size=block_size)
    out = torch.full_like(batch.query, float("nan"))  # [num_tokens, num_heads, head_size]
    paged_attention_triton(*batch.args(), out=out, tile_n=tile_n, num_warps=8)
    expected = paged_attention_ref(*batch.args(*batch.clean_caches()))  # [num_tokens, num_heads, head_size]
    assert max_rel_error(out, expected) < REL_TOL[torch.float32]


@pytest.mark.parametrize("num_splits", [2, 3, 8])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
def test_split_kv_matches_reference(num_splits, dtype):
    """Flash-decoding: each tile's keys shared among programs, then combined. The prefill rows
    early in a long chunk see no key of the later splits; 8 splits of a 1-tile request are mostly empty."""
    batch = make_paged_batch([1, 40, 1, 3], [300, 120, 9, 150], num_heads=6, num_kv_heads=2, head_size=16,
                             block_size=16, dtype=dtype)
    out = torch.full_like(batch.query, float("nan"))  # [num_tokens, num_heads, head_size]
    paged_attention_triton(*batch.args(), out=out, num_splits=num_splits)
    expected = paged_attention_ref(*batch.args(*batch.clean_caches()))  # [num_tokens, num_heads, head_size]
    assert max_rel_error(out, expected) < REL_TOL[dtype]


def test_paged_attention_int64_metadata_and_strided_query():
    """int64 metadata, a query sliced out of a fused qkv tensor, and out=None."""
    batch = make_paged_batch([3, 1], [20, 35], index_dtype=torch.int64)
    num_tokens, num_heads, head_size = batch.query.shape
    qkv = torch.randn(num_tokens, 3 * num_heads * head_size)  # [num_tokens, 3 * num_heads * head_size]
    qkv[:, : num_heads * head_size] = batch.query.reshape(num_tokens, -1)
    batch.query = qkv[:, : num_heads * head_size].view(num_tokens, num_heads, head_size)  # strided view
    out = paged_attention_triton(*batch.args())  # [num_tokens, num_heads, head_size]
    expected = paged_attention_ref(*batch.args(*batch.clean_caches()))
    assert max_rel_error(out, expected) < REL_TOL[torch.float32]


# Head sizes of the supported families: 32 and 80 (small Llamas), 64 (TinyLlama, GPT-2), 96, 128, 256.
@pytest.mark.parametrize("head_size", [32, 64, 80, 96, 128, 256])
def test_paged_attention_head_sizes_match_reference(head_size):
    batch = make_paged_batch([1, 5, 1], [21, 12, 3], num_heads=2, num_kv_heads=1, head_size=head_size,
                             dtype=torch.bfloat16)
    out = torch.full_like(batch.query, float("nan"))  # [num_tokens, num_heads, head_size]
    paged_attention_triton(*batch.args(), out=out, num_splits=2 if head_size == 80 else 1)
    expected = paged_attention_ref(*batch.args(*batch.clean_caches()))  # [num_tokens, num_heads, head_size]
    assert max_rel_error(out, expected) < REL_TOL[torch.bfloat16]


# (q_lens, seq_lens, window, block_size, tile_n, num_splits): windows shorter than a block, spanning
# several, reaching back past a chunk's start, longer than every sequence; split launches too.
WINDOW_CASES = {
    "decode-w5": ([1, 1, 1], [3, 20, 41], 5, 16, None, 1),
    "prefill-w7": ([30], [30], 7, 16, None, 1),
    "chunk-w20-block8": ([9, 1, 17], [50, 33, 17], 20, 8, None, 1),
    "tile64-w33": ([12, 1], [90, 70], 33, 16, 64, 1),
    "splits-w24": ([1, 40, 1], [120, 60, 9], 24, 16, None, 3),
    "w-longer-than-seqs": ([4, 1], [10, 30], 100, 16, None, 1),
}


@pytest.mark.parametrize("case", WINDOW_CASES.values(), ids=WINDOW_CASES.keys())
def test_sliding_window_matches_reference(case):
    q_lens, seq_lens, window, block_size, tile_n, num_splits = case
    batch = make_paged_batch(q_lens, seq_lens, num_heads=4, num_kv_heads=2, block_size=block_size)
    out = torch.full_like(batch.query, float("nan"))  # [num_tokens, num_heads, head_size]
    paged_attention_triton(*batch.args(), out=out, tile_n=tile_n, num_splits=num_splits, sliding_window=window)
    expected = paged_attention_ref(*batch.args(*batch.clean_caches()), sliding_window=window)
    assert max_rel_error(out, expected) < REL_TOL[torch.float32]


def test_paged_attention_rejects_unsupported_shapes():
    batch = make_paged_batch([1], [5], num_heads=3, num_kv_heads=2)
    with pytest.raises(ValueError, match="multiple"):
        paged_attention_triton(*batch.args())
    batch = make_paged_batch([1], [5], head_size=8)
    with pytest.raises(ValueError, match="head_size must be at least 16"):
        paged_attention_triton(*batch.args())
    batch = make_paged_batch([1], [5])
    with pytest.raises(ValueError, match="sliding_window must be at least 1"):
        paged_attention_triton(*batch.args(), sliding_window=0)
    batch = make_paged_batch([1], [5])
    with pytest.raises(ValueError, match="tile_n"):
        paged_attention_triton(*batch.args(), tile_n=48)
    with pytest.raises(ValueError, match="num_splits"):
        paged_attention_triton(*batch.args(), num_splits=0)


@pytest.mark.parametrize(
    "key_dtype,cache_dtype,block_size",
    [
        (torch.float32, torch.float32, 16),
        (torch.float16, torch.float16, 32),
        (torch.bfloat16, torch.bfloat16, 16),
        (torch.float32, torch.bfloat16, 32),
    ],
    ids=str,
)
@pytest.mark.parametrize("head_size", [16, 80, 96])
def test_reshape_and_cache_matches_reference(key_dtype, cache_dtype, block_size, head_size):
    num_tokens, num_kv_heads, num_blocks = 11, 3, 5
    gen = torch.Generator().manual_seed(1)
    qkv = torch.randn(num_tokens, 3, num_kv_heads, head_size, generator=gen).to(key_dtype)
    key, value = qkv[:, 1], qkv[:, 2]  # [num_tokens, num_kv_heads, head_size] strided views
    slot_mapping = torch.randperm(num_blocks * block_size, generator=gen)[:num_tokens]  # [num_tokens]
    slot_mapping[[0, 4, 10]] = -1  # padding tokens: never written
    cache_shape = (num_blocks, block_size, num_kv_heads, head_size)
    key_cache = torch.full(cache_shape, float("nan"), dtype=cache_dtype)  # [num_blocks, block_size, kv_heads, head]
    value_cache = torch.full(cache_shape, float("nan"), dtype=cache_dtype)
    key_ref, value_ref = key_cache.clone(), value_cache.clone()

    reshape_and_cache_triton(key, value, key_cache, value_cache, slot_mapping)
    reshape_and_cache_ref(key, value, key_ref, value_ref, slot_mapping)

    # A copy is exact; a downcast may differ by one bf16 ulp, because the interpreter truncates
    # fp32 -> bf16 where torch (and the GPU) round to nearest even.
    rtol = 0.0 if key_dtype == cache_dtype else 2**-7
    torch.testing.assert_close(key_cache, key_ref, rtol=rtol, atol=0, equal_nan=True)
    torch.testing.assert_close(value_cache, value_ref, rtol=rtol, atol=0, equal_nan=True)
    written = (~key_cache.isnan()).all(dim=(2, 3)).flatten().nonzero().flatten()  # [num_written] slots
    assert sorted(written.tolist()) == sorted(slot_mapping[slot_mapping >= 0].tolist())
    assert key_cache.isnan().sum() == (num_blocks * block_size - 8) * num_kv_heads * head_size


def test_reshape_then_attend_matches_reference():
    """The two kernels together, as one model step uses them: write this step's K/V, then attend."""
    batch = make_paged_batch([4, 1], [10, 21], num_heads=4, num_kv_heads=2)
    # Take this step's K/V back out of the cache and poison their slots, so the step must write them.
    slots = torch.cat([torch.arange(6, 10), torch.tensor([20])])  # [num_tokens] positions of the new tokens
    req = torch.tensor([0, 0, 0, 0, 1])  # [num_tokens]
    block_size = batch.key_cache.shape[1]
    phys = batch.block_table[req, slots // block_size].long() * block_size + slots % block_size  # [num_tokens]
    flat_k = batch.key_cache.flatten(0, 1)  # [num_slots, num_kv_heads, head_size] view
    flat_v = batch.value_cache.flatten(0, 1)
    key, value = flat_k[phys].clone(), flat_v[phys].clone()  # [num_tokens, num_kv_heads, head_size]
    expected = paged_attention_ref(*batch.args(*batch.clean_caches()))
    flat_k[phys] = float("nan")
    flat_v[phys] = float("nan")

    reshape_and_cache_triton(key, value, batch.key_cache, batch.value_cache, phys)
    out = paged_attention_triton(*batch.args())
    assert max_rel_error(out, expected) < REL_TOL[torch.float32]
