"""Choose the kernel implementation for a tensor's device, or the one forced by env var.

Backends: `triton` (CUDA; on CPU tensors only under TRITON_INTERPRET=1), `cpp` (the C++ CPU kernels
of kernels/cpu_kernels.py, built at first use) and `torch` (the reference). Unforced, CUDA tensors
use Triton and CPU tensors use `cpp` when it builds, else the reference. The C++ kernel has no
sliding window: a windowed layer's attention on the `cpp` backend runs the reference.

The engine chooses once (`select_backend` when its model runner is built, which also builds the
C++ kernels then) and passes `backend=` on every call; a call without it chooses for itself.

On a CPU with AMX, a bfloat16 prompt computed from its first token takes `prompt_attention` (torch's
flash attention, whose GEMMs run on AMX tiles) instead of the C++ kernel, which widens bf16 to fp32:
`prompt_sdpa` says where; `ENGINETUI_PROMPT_SDPA=1` / `0` forces it on or off.
"""

import os

import torch

from enginetui.kernels import cpu_kernels
from enginetui.kernels.reference import paged_attention_ref, reshape_and_cache_ref

BACKEND_ENV = "ENGINETUI_ATTENTION_BACKEND"
BACKENDS = ("torch", "triton", "cpp")
PROMPT_SDPA_ENV = "ENGINETUI_PROMPT_SDPA"  # 1: whole prompts take prompt_attention, 0: never; unset: prompt_sdpa's rule
# shorter prompts stay on the C++ kernel: torch's is the slower one below this in opt-125m's heads (docs/speed.md)
PROMPT_SDPA_MIN_TOKENS = 64


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


def prompt_sdpa(device: torch.device, dtype: torch.dtype, backend: str) -> bool:
    """Whether whole prompts of at least PROMPT_SDPA_MIN_TOKENS take `prompt_attention` (the env var, else: the C++
    backend, in bfloat16, on a CPU with AMX tiles)."""
    forced = os.environ.get(PROMPT_SDPA_ENV, "").strip()
    if forced not in ("", "0", "1"):
        raise ValueError(f"{PROMPT_SDPA_ENV} must be 0 or 1, got {forced!r}")
    if device.type != "cpu" or backend != "cpp":
        return False
    if forced:
        return forced == "1"
    return dtype == torch.bfloat16 and torch.cpu._is_amx_tile_supported()


def prompt_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scale: float, out: torch.Tensor
) -> None:
    """Causal attention of one prompt computed from its first token over its own keys, into `out`.
    query, out: [num_tokens, num_heads, head_size]; key, value: [num_tokens, num_kv_heads, head_size]."""
    o = torch.nn.functional.scaled_dot_product_attention(
        query.transpose(0, 1)[None],  # [1, num_heads, num_tokens, head_size]
        key.transpose(0, 1)[None],
        value.transpose(0, 1)[None],
        is_causal=True,
        scale=scale,
        enable_gqa=key.shape[1] != query.shape[1],
    )  # [1, num_heads, num_tokens, head_size]
    out.copy_(o[0].transpose(0, 1))


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
