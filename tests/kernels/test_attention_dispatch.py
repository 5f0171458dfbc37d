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


@pytest.mark.parametrize("value,expected", [("torch", "torch"), ("triton", "triton"), (" Triton ", "triton"),
                                            ("cpp", "cpp")])
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
