"""Choose the kernel implementation for a tensor's device, or the one forced by env var.

Backends: `triton` (CUDA; on CPU tensors only under TRITON_INTERPRET=1), `cpp` (the C++ CPU kernels
of kernels/cpu_kernels.py, built at first use) and `torch` (the reference). Unforced, CUDA tensors
use Triton and CPU tensors use `cpp` when it builds, else the reference. The C++ kernel has no
sliding window: a windowed layer's attention on the `cpp` backend runs the reference.

The engine chooses once (`select_backend` when its model runner is built, which also builds the
C++ kernels then) and passes `backend=` on every call; a call without it chooses for itself.
"""

import os

import torch

from enginetui.kernels import cpu_kernels
from enginetui.kernels.reference import paged_attention_ref, reshape_and_cache_ref

BACKEND_ENV = "ENGINETUI_ATTENTION_BACKEND"
BACKENDS = ("torch", "triton", "cpp")


def select_backend(device: torch.device) -> str:
    """The forced backend if the env var is set, else the device's (see the module docstring)."""
    forced = os.environ.get(BACKEND_ENV, "").strip().lower()
    if forced == "cpp" and not cpu_kernels.available():
        raise RuntimeError(
            f"{BACKEND_ENV}=cpp, but the C++ kernels are unavailable: {cpu_kernels.unavailable_reason()}"
        )
    if forced in BACKENDS:
        return forced
    if forced:
        raise ValueError(f"{BACKEND_ENV} must be one of {', '.join(BACKENDS)}, got {forced!r}")
    if device.type == "cuda":
        return "triton"
    return "cpp" if cpu_kernels.available() else "torch"


def reshape_and_cache(key, value, key_cache, value_cache, slot_mapping, backend: str | None = None) -> None:
    """Write new K/V per token into `slot_mapping` slots (see kernels.reference); `backend`: the
    chosen one (None: select_backend for the tensors' device)."""
    backend = backend or select_backend(key.device)
    if backend == "triton":
        from enginetui.kernels.triton_reshape_and_cache import reshape_and_cache_triton

        reshape_and_cache_triton(key, value, key_cache, value_cache, slot_mapping)
    elif backend == "cpp":
        cpu_kernels.reshape_and_cache_cpu(key, value, key_cache, value_cache, slot_mapping)
    else:
        reshape_and_cache_ref(key, value, key_cache, value_cache, slot_mapping)


def paged_attention(
    query,
    key_cache,
    value_cache,
    query_start_loc,
    seq_lens,
    block_table,
    scale,
    out=None,
    sliding_window=None,
    backend: str | None = None,
    max_query_len: int | None = None,
):
    """Varlen paged attention for a mixed prefill/decode batch, optionally windowed (see kernels.reference);
    `backend`: the chosen one (None: select_backend for the tensors' device); `max_query_len`: the step's
    longest query, which picks the Triton launch (kernels.variants.launch_for_step; None: the default)."""
    backend = backend or select_backend(query.device)
    if backend == "triton":
        from enginetui.kernels.triton_paged_attention import paged_attention_triton
        from enginetui.kernels.variants import launch_for_step

        group = query.shape[1] // key_cache.shape[2]
        launch = launch_for_step(max_query_len, group, query.dtype in (torch.float16, torch.bfloat16))
        return paged_attention_triton(
            query,
            key_cache,
            value_cache,
            query_start_loc,
            seq_lens,
            block_table,
            scale,
            out=out,
            sliding_window=sliding_window,
            **launch.kwargs(),
        )
    if backend == "cpp" and sliding_window is None:
        return cpu_kernels.paged_attention_cpu(
            query, key_cache, value_cache, query_start_loc, seq_lens, block_table, scale, out=out
        )
    return paged_attention_ref(
        query,
        key_cache,
        value_cache,
        query_start_loc,
        seq_lens,
        block_table,
        scale,
        out=out,
        sliding_window=sliding_window,
    )
