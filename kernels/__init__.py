"""Attention kernels: one dispatch point for the Triton kernels (CUDA) and the torch reference (CPU).

`ENGINETUI_ATTENTION_BACKEND` forces a backend: `torch` or `triton` (the latter runs on CPU
tensors under `TRITON_INTERPRET=1`). Unset, CUDA tensors use Triton and CPU tensors use torch.
"""

from kernels.dispatch import paged_attention, reshape_and_cache, select_backend

__all__ = ["paged_attention", "reshape_and_cache", "select_backend"]
