"""The dispatch point: backend by device, forced by ENGINETUI_ATTENTION_BACKEND."""

import pytest
import torch

from enginetui.kernels import paged_attention, reshape_and_cache, select_backend
from enginetui.kernels.dispatch import BACKEND_ENV
from enginetui.kernels.paged_batch import REL_TOL, make_paged_batch, max_rel_error
from enginetui.kernels.reference import paged_attention_ref


def test_backend_follows_device(monkeypatch):
    monkeypatch.delenv(BACKEND_ENV, raising=False)
    assert select_backend(torch.device("cpu")) == "cpp"  # the C++ kernels build on this machine
    assert select_backend(torch.device("cuda")) == "triton"


@pytest.mark.parametrize(
    "value,expected", [("torch", "torch"), ("triton", "triton"), (" Triton ", "triton"), ("cpp", "cpp")]
)
def test_env_var_forces_backend(monkeypatch, value, expected):
    monkeypatch.setenv(BACKEND_ENV, value)
    assert select_backend(torch.device("cpu")) == expected
    assert select_backend(torch.device("cuda")) == expected


def test_bad_env_value_raises(monkeypatch):
    monkeypatch.setenv(BACKEND_ENV, "cuda")
    with pytest.raises(ValueError, match=BACKEND_ENV):
        select_backend(torch.device("cpu"))


@pytest.mark.parametrize("window", [None, 6])
@pytest.mark.parametrize("backend", ["torch", "triton", "cpp"])
def test_dispatched_step_matches_reference(monkeypatch, backend, window):
    """One model step through the dispatch point, on CPU tensors, with each backend forced, with and
    without a sliding window (the C++ kernel has none: windowed attention runs the reference there)."""
    monkeypatch.setenv(BACKEND_ENV, backend)
    batch = make_paged_batch([3, 1], [12, 20], poison=0.0)
    key = torch.randn(4, 2, 16)  # [num_tokens, num_kv_heads, head_size]
    value = torch.randn(4, 2, 16)  # [num_tokens, num_kv_heads, head_size]
    block_size = batch.key_cache.shape[1]
    positions = torch.tensor([9, 10, 11, 19])  # [num_tokens] the new tokens' positions
    req = torch.tensor([0, 0, 0, 1])  # [num_tokens]
    slots = batch.block_table[req, positions // block_size].long() * block_size + positions % block_size
    ref_k, ref_v = batch.key_cache.clone(), batch.value_cache.clone()
    ref_k.flatten(0, 1)[slots] = key
    ref_v.flatten(0, 1)[slots] = value
    expected = paged_attention_ref(*batch.args(ref_k, ref_v), sliding_window=window)  # [num_tokens, heads, head]

    reshape_and_cache(key, value, batch.key_cache, batch.value_cache, slots)
    out = paged_attention(*batch.args(), sliding_window=window)
    assert torch.equal(batch.key_cache, ref_k) and torch.equal(batch.value_cache, ref_v)
    assert max_rel_error(out, expected) < REL_TOL[torch.float32]


def test_launch_follows_the_step_shape():
    """Decodes and short chunks keep 16-row tiles; a prompt chunk filling 64 rows (tokens x GQA group)
    in half precision gets the prefill tile; fp32 never does (64-row fp32 tiles spill)."""
    from enginetui.kernels.variants import DEFAULT, PREFILL, launch_for_step

    assert launch_for_step(1, 1, True) == DEFAULT
    assert launch_for_step(1, 8, True) == DEFAULT  # a GQA decode: 8 rows
    assert launch_for_step(63, 1, True) == DEFAULT
    assert launch_for_step(64, 1, True) == PREFILL
    assert launch_for_step(16, 4, True) == PREFILL  # Llama-3.1-8B's group of 4
    assert launch_for_step(2048, 4, False) == DEFAULT
    assert launch_for_step(None, 4, True) == DEFAULT
    assert PREFILL.block_m == 64


@pytest.mark.parametrize("block_m", [16, 32, 64, 128])
def test_every_tile_height_matches_reference_in_half_precision(block_m):
    """A mixed step (a decode, a 70-token chunk) at each query-tile height, fp16 under the interpreter."""
    from enginetui.kernels.triton_paged_attention import paged_attention_triton

    batch = make_paged_batch([1, 70], [29, 95], num_heads=4, num_kv_heads=2, head_size=16, dtype=torch.float16)
    out = torch.full_like(batch.query, float("nan"))  # [num_tokens, num_heads, head_size]
    paged_attention_triton(*batch.args(), out=out, block_m=block_m, tile_n=32)
    expected = paged_attention_ref(*batch.args(*batch.clean_caches()))  # [num_tokens, num_heads, head_size]
    assert max_rel_error(out, expected) < REL_TOL[torch.float16]


def test_dispatch_picks_the_prefill_tile_from_the_step(monkeypatch):
    """The engine's path: max_query_len reaches the Triton launch, which then runs PREFILL's tile."""
    from enginetui.kernels import triton_paged_attention
    from enginetui.kernels.variants import PREFILL

    launches = []
    real = triton_paged_attention.paged_attention_launch
    monkeypatch.setattr(
        triton_paged_attention, "paged_attention_launch", lambda *a, **k: launches.append(a[-1]) or real(*a, **k)
    )
    batch = make_paged_batch([1, 70], [29, 95], num_heads=4, num_kv_heads=2, head_size=16, dtype=torch.float16)
    expected = paged_attention_ref(*batch.args(*batch.clean_caches()))
    for max_query_len, block_m in ((70, PREFILL.block_m), (1, None)):
        out = paged_attention(*batch.args(), backend="triton", max_query_len=max_query_len)
        assert launches[-1] == block_m
        assert max_rel_error(out, expected) < REL_TOL[torch.float16]
