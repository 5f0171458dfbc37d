"""Attention kernels: one dispatch point for the Triton kernels (CUDA), the C++ kernels (CPU) and the
torch reference (the specification, and the CPU fallback).

`ENGINETUI_ATTENTION_BACKEND` forces a backend: `torch`, `triton` (runs on CPU tensors under
`TRITON_INTERPRET=1`) or `cpp`. Unset, CUDA tensors use Triton and CPU tensors the C++ kernels
(built at first use; the torch reference where they cannot be built).
"""

from enginetui.kernels.dispatch import paged_attention, reshape_and_cache, select_backend

__all__ = ["paged_attention", "reshape_and_cache", "select_backend"]
