"""The Triton kernels against the torch reference, under TRITON_INTERPRET=1 on CPU (see conftest)."""

import pytest
import torch

from enginetui.kernels.paged_batch import REL_TOL, make_paged_batch, max_rel_error
from enginetui.kernels.reference import paged_attention_ref, reshape_and_cache_ref
from enginetui.kernels.triton_paged_attention import paged_attention_triton
from enginetui.kernels.triton_reshape_and_cache import reshape_and_cache_triton
from tests.kernels.cases import ATTENTION_CASES, KV_WRITE_CASES, kv_write, slice_query_out_of_qkv, take_step_kv_out

DTYPES = [torch.float32, torch.float16, torch.bfloat16]

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
        q_lens,
        seq_lens,
        num_heads=num_heads,
        num_kv_heads=num_kv_heads,
        head_size=head_size,
        block_size=block_size,
        dtype=dtype,
    )
    out = torch.full_like(batch.query, float("nan"))  # [num_tokens, num_heads, head_size]
    assert paged_attention_triton(*batch.args(), out=out) is out  # on the poisoned caches
    expected = paged_attention_ref(*batch.args(*batch.clean_caches()))  # [num_tokens, num_heads, head_size]
    assert max_rel_error(out, expected) < REL_TOL[dtype]


@pytest.mark.parametrize("tile_n,block_size", [(64, 16), (32, 32), (128, 8)])
def test_paged_attention_tile_variants_match_reference(tile_n, block_size):
    """Inner steps spanning several blocks (or one): only the speed may change."""
    batch = make_paged_batch(
        [1, 13, 1, 40], [29, 13, 130, 95], num_heads=4, num_kv_heads=2, head_size=16, block_size=block_size
    )
    out = torch.full_like(batch.query, float("nan"))  # [num_tokens, num_heads, head_size]
    paged_attention_triton(*batch.args(), out=out, tile_n=tile_n, num_warps=8)
    expected = paged_attention_ref(*batch.args(*batch.clean_caches()))  # [num_tokens, num_heads, head_size]
    assert max_rel_error(out, expected) < REL_TOL[torch.float32]


@pytest.mark.parametrize("block_m,num_heads,num_kv_heads", [(32, 4, 2), (64, 4, 4), (64, 8, 1), (16, 32, 1)])
def test_taller_query_tiles_match_reference(block_m, num_heads, num_kv_heads):
    """More rows per tile (block_m): several query tokens of a prompt, or of a GQA group, per program;
    a block_m under the group (32 heads on one kv head) is raised to the group. Only the speed may change."""
    batch = make_paged_batch(
        [1, 37, 1, 70], [29, 37, 130, 95], num_heads=num_heads, num_kv_heads=num_kv_heads, head_size=16, block_size=16
    )
    out = torch.full_like(batch.query, float("nan"))  # [num_tokens, num_heads, head_size]
    paged_attention_triton(*batch.args(), out=out, block_m=block_m)
    expected = paged_attention_ref(*batch.args(*batch.clean_caches()))  # [num_tokens, num_heads, head_size]
    assert max_rel_error(out, expected) < REL_TOL[torch.float32]


@pytest.mark.parametrize("num_splits", [2, 3, 8])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
def test_split_kv_matches_reference(num_splits, dtype):
    """Flash-decoding: each tile's keys shared among programs, then combined. The prefill rows
    early in a long chunk see no key of the later splits; 8 splits of a 1-tile request are mostly empty."""
    batch = make_paged_batch(
        [1, 40, 1, 3], [300, 120, 9, 150], num_heads=6, num_kv_heads=2, head_size=16, block_size=16, dtype=dtype
    )
    out = torch.full_like(batch.query, float("nan"))  # [num_tokens, num_heads, head_size]
    paged_attention_triton(*batch.args(), out=out, num_splits=num_splits)
    expected = paged_attention_ref(*batch.args(*batch.clean_caches()))  # [num_tokens, num_heads, head_size]
    assert max_rel_error(out, expected) < REL_TOL[dtype]


def test_paged_attention_int64_metadata_and_strided_query():
    """int64 metadata, a query sliced out of a fused qkv tensor, and out=None."""
    batch = make_paged_batch([3, 1], [20, 35], index_dtype=torch.int64)
    slice_query_out_of_qkv(batch)
    out = paged_attention_triton(*batch.args())  # [num_tokens, num_heads, head_size]
    expected = paged_attention_ref(*batch.args(*batch.clean_caches()))
    assert max_rel_error(out, expected) < REL_TOL[torch.float32]


# Head sizes of the supported families: 32 and 80 (small Llamas), 64 (TinyLlama, GPT-2), 96, 128, 256.
@pytest.mark.parametrize("head_size", [32, 64, 80, 96, 128, 256])
def test_paged_attention_head_sizes_match_reference(head_size):
    batch = make_paged_batch(
        [1, 5, 1], [21, 12, 3], num_heads=2, num_kv_heads=1, head_size=head_size, dtype=torch.bfloat16
    )
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
    with pytest.raises(ValueError, match="block_m"):
        paged_attention_triton(*batch.args(), block_m=24)


@pytest.mark.parametrize("key_dtype,cache_dtype,block_size", KV_WRITE_CASES, ids=str)
@pytest.mark.parametrize("head_size", [16, 64, 80, 96, 128, 256])  # every family head size
def test_reshape_and_cache_matches_reference(key_dtype, cache_dtype, block_size, head_size):
    w = kv_write(key_dtype, cache_dtype, block_size, head_size)
    reshape_and_cache_triton(w.key, w.value, w.key_cache, w.value_cache, w.slot_mapping)
    reshape_and_cache_ref(w.key, w.value, w.key_ref, w.value_ref, w.slot_mapping)

    # A copy is exact; a downcast may differ by one bf16 ulp, because the interpreter truncates
    # fp32 -> bf16 where torch (and the GPU) round to nearest even.
    rtol = 0.0 if key_dtype == cache_dtype else 2**-7
    torch.testing.assert_close(w.key_cache, w.key_ref, rtol=rtol, atol=0, equal_nan=True)
    torch.testing.assert_close(w.value_cache, w.value_ref, rtol=rtol, atol=0, equal_nan=True)
    assert w.written_slots() == w.expected_slots()


def test_reshape_then_attend_matches_reference():
    """The two kernels together, as one model step uses them: write this step's K/V, then attend."""
    batch = make_paged_batch([4, 1], [10, 21], num_heads=4, num_kv_heads=2)
    key, value, slots, expected = take_step_kv_out(batch)
    reshape_and_cache_triton(key, value, batch.key_cache, batch.value_cache, slots)
    out = paged_attention_triton(*batch.args())
    assert max_rel_error(out, expected) < REL_TOL[torch.float32]
