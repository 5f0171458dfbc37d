"""Linear layers and the lm_head through oneDNN with prepacked weights: a post-load model transform.

`prepack_linear_weights(model)` reorders every linear weight of a loaded model once into oneDNN's
blocked layout (`torch.ops.mkldnn._reorder_linear_weight`) and swaps the parameter for a
`PackedWeight`: the same dense tensor, carrying its packed copy. `F.linear` on such a weight (every
model layer computes `F.linear(x, self.weight, self.bias)`), or `linear_relu` (relu then runs as
oneDNN's post-op, no pass of its own), runs `torch.ops.mkldnn._linear_pointwise` on the packed
copy for batches of its model's `min_rows` rows or more, and the dense GEMM (MKL) below that;
anything else (an embedding lookup on a tied weight, a comparison in a test) sees the dense tensor.

Which one is faster for a row or two depends on the CPU and on the weight's shape, so `min_rows`
is measured at load for each shape of weight the model has (`measure_min_rows`: both, 1 and 2
rows; opt-125m has five shapes, about 0.3 s). On an Intel Xeon
(AVX-512) MKL's dense GEMM won below 3 rows; on an AMD EPYC (Zen 3, AVX2) MKL's is 4-9x slower
than oneDNN's there (opt-125m shapes, 2 threads: fc1 at 1 row 0.52 against 0.13 ms, at 2 rows
1.75 against 0.19 ms; the lm_head at 2 rows 40 against 11 ms), so a decode step of 1 or 2
requests took 65-140 ms where 3 requests took 45. On an AMD EPYC (Zen 5, AVX-512) the two are
even for a layer's weight at 1 row (fc1 0.20 against 0.21 ms) while MKL's lm_head takes 12.9 ms
against oneDNN's 3.4: one choice for the whole model, measured on a layer, could cost a decode
step of one request 9 ms. It is model-agnostic: it finds the weights through the
model contract (every `Linear` layer, and the token embedding when the lm_head is tied to it).

Measured on this repository's machine (opt-125m shapes, fp32, one thread): decode GEMMs of 8 rows
about 2x faster, 64 rows 15-20%, the 8-row lm_head 37 -> 14 ms; large prefill batches about even.
The packed copies cost the memory of the weights once more. Greedy output stays the same up to
summation order (the parity tests compare with transformers).

`ENGINETUI_LINEAR_BACKEND=torch` turns the transform off; `onednn` (the default on CPU when torch
has oneDNN) keeps it.
"""

import os
import time

import torch
import torch.nn.functional as F
from torch import nn

from enginetui.core.models.layers.linear import Linear, linear_relu

LINEAR_BACKEND_ENV = "ENGINETUI_LINEAR_BACKEND"
LINEAR_BACKENDS = ("onednn", "torch")
PACK_FOR_ROWS = 64  # the batch size oneDNN chooses the packed layout for (any batch size works with it)
MAX_MIN_ROWS = 3  # from this many rows oneDNN's packed GEMM is used on every CPU measured
TIMED_RUNS = 5  # timed runs of each GEMM when measuring (after one untimed), the fastest kept


class PackedWeight(torch.Tensor):
    """A dense linear weight `[out_features, in_features]` that also holds its oneDNN-packed copy."""

    _packed: torch.Tensor  # the weight reordered for oneDNN (an opaque mkldnn tensor)
    _min_rows: int  # batches of this many rows or more use `_packed`, smaller ones the dense weight

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.linear or func is linear_relu:
            x, weight = args[0], args[1]
            bias = args[2] if len(args) > 2 else kwargs.get("bias")
            if isinstance(weight, cls) and x.dim() == 2 and x.shape[0] >= weight._min_rows:
                attr = "relu" if func is linear_relu else "none"  # relu as a oneDNN post-op
                with torch._C.DisableTorchFunctionSubclass():
                    return torch.ops.mkldnn._linear_pointwise(x, weight._packed, bias, attr, [], "")
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **kwargs)
        if func is torch.Tensor.detach:  # nn.Parameter(weight) detaches: keep what it is
            out = out.as_subclass(cls)
            out._packed, out._min_rows = args[0]._packed, args[0]._min_rows
        return out


def linear_backend(device: torch.device) -> str:
    """`onednn` or `torch`: the forced one if the env var is set, else oneDNN on CPU when torch has it."""
    forced = os.environ.get(LINEAR_BACKEND_ENV, "").strip().lower()
    if forced and forced not in LINEAR_BACKENDS:
        raise ValueError(f"{LINEAR_BACKEND_ENV} must be one of {', '.join(LINEAR_BACKENDS)}, got {forced!r}")
    if device.type != "cpu" or not torch.backends.mkldnn.is_available():
        return "torch"
    return forced or "onednn"


def prepare_cpu_model(model: nn.Module, device: torch.device) -> None:
    """After loading: prepack the linear weights when oneDNN is the linear backend for `device`."""
    if linear_backend(device) == "onednn":
        prepack_linear_weights(model)


def packable(dtype: torch.dtype) -> bool:
    """fp32 always; bf16 / fp16 only where the CPU computes them natively (AVX512-BF16 / AMX,
    AVX512-FP16), else oneDNN would emulate them."""
    if dtype == torch.float32:
        return True
    if dtype == torch.bfloat16:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    if dtype == torch.float16:
        return bool(torch.ops.mkldnn._is_mkldnn_fp16_supported())
    return False


def prepack_linear_weights(model: nn.Module, min_rows: int | None = None, time_gemm=None) -> int:
    """Give every linear weight of a loaded model (and a tied lm_head's embedding) its packed copy;
    returns how many weights were packed. `min_rows`: the smallest batch that uses the packed copy
    (None: measured on this CPU for each shape of weight, `measure_min_rows` with `time_gemm`)."""
    owners = [m for m in model.modules() if isinstance(m, (Linear, nn.Linear))]
    if getattr(model, "tie_word_embeddings", False):
        owners.append(model.get_input_embeddings())  # compute_logits runs F.linear on its weight
    owners = [m for m in owners if m.weight.dim() == 2 and packable(m.weight.dtype)]
    measured: dict[tuple, int] = {}  # (shape, dtype) -> its min_rows: each shape measured once
    for module in owners:
        weight = _packed_weight(module.weight.data)
        key = (tuple(weight.shape), weight.dtype)
        if min_rows is None and key not in measured:
            measured[key] = measure_min_rows(weight, time_gemm)
        weight._min_rows = min_rows if min_rows is not None else measured[key]
        module.weight = nn.Parameter(weight, requires_grad=False)
    return len(owners)


def measure_min_rows(weight: "PackedWeight", time_gemm=None) -> int:
    """The smallest batch (1, 2 or MAX_MIN_ROWS rows) from which oneDNN's packed GEMM on `weight`
    is as fast as the dense one on this CPU, with this thread count (a few milliseconds).
    `time_gemm(weight, rows, packed)`: seconds of one such GEMM (default: timed here)."""
    time_gemm = time_gemm or _time_gemm
    for rows in range(1, MAX_MIN_ROWS):
        if time_gemm(weight, rows, True) <= time_gemm(weight, rows, False):
            return rows
    return MAX_MIN_ROWS


def _time_gemm(weight: "PackedWeight", rows: int, packed: bool) -> float:
    """Seconds of the fastest of TIMED_RUNS GEMMs of `rows` rows by `weight`, packed (oneDNN) or
    dense, after one untimed run."""
    dense = weight.as_subclass(torch.Tensor)  # [out_features, in_features]
    x = torch.full((rows, dense.shape[1]), 0.5, dtype=dense.dtype)  # [rows, in_features] (no RNG drawn)
    if packed:
        run = lambda: torch.ops.mkldnn._linear_pointwise(x, weight._packed, None, "none", [], "")  # noqa: E731
    else:
        run = lambda: F.linear(x, dense)  # noqa: E731
    run()
    best = float("inf")
    for _ in range(TIMED_RUNS):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def _packed_weight(dense: torch.Tensor) -> PackedWeight:
    weight = dense.as_subclass(PackedWeight)
    weight._packed = torch.ops.mkldnn._reorder_linear_weight(dense, PACK_FOR_ROWS)
    weight._min_rows = MAX_MIN_ROWS
    return weight
