"""Linear layers and the lm_head through oneDNN with prepacked weights: a post-load model transform.

`prepack_linear_weights(model)` reorders every linear weight (found through the model contract) once
into oneDNN's blocked layout and swaps the parameter for a `PackedWeight`: the same dense tensor,
carrying its packed copy. `F.linear` on it (and `linear_relu`, relu as oneDNN's post-op) runs oneDNN's
packed GEMM for batches of `min_rows` rows or more and MKL's dense GEMM below; anything else sees the
dense tensor. Which is faster for a row or two depends on the CPU and the weight's shape, so
`min_rows` is measured at load per shape, as a decode step meets the weight (docs/speed.md has the
figures). In float32 and bfloat16, batches of 1-8 rows may run this project's C++ kernel instead
(kernels/csrc/cpu_linear.cpp: one pass over the weight), at the batch sizes where it is built and measured faster.
The engine keeps what it measured in the kernel cache folder (`SAVED_CHOICES`), so later starts on the same
machine, torch, kernels and thread count read it instead of measuring again (delete the file to measure again).
`ENGINETUI_LINEAR_BACKEND=torch` turns the transform off; `onednn` (the CPU default) keeps it.
"""

import glob
import hashlib
import json
import logging
import os
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from enginetui.core.models.contract import CausalLM
from enginetui.core.models.layers.linear import Linear, linear_relu
from enginetui.kernels import cpu_isa, cpu_kernels

LINEAR_BACKEND_ENV = "ENGINETUI_LINEAR_BACKEND"
LINEAR_BACKENDS = ("onednn", "torch")
PACK_FOR_ROWS = 64  # the batch size oneDNN chooses the packed layout for (any batch size works with it)
MAX_MIN_ROWS = 3  # from this many rows oneDNN's packed GEMM is used on every CPU measured
# the batch sizes the C++ kernel is timed at against the GEMM otherwise chosen: each decides for the sizes above
# the one before it (4 for 3 and 4 rows, 8 for 5-8), since which wins changes with the rows and the CPU
SKINNY_ROWS = (1, 2, 4, 8)
TIMED_RUNS = 3  # timed runs of each GEMM per clock reading (after one untimed), the fastest kept
MEASURE_ROUNDS = 2  # clock readings of each GEMM when measuring, packed and dense in turns, the fastest kept
# the dense GEMM is chosen only when it is faster than this many times oneDNN's: a near tie on the clock
# goes to oneDNN's (out_proj of opt-125m on a Zen 5: 140 against 157 us on the clock, one reading in three
# the other way round, while inside a decode step the packed GEMM took 74 us and the dense one 170)
DENSE_MARGIN = 1.2
# the C++ kernel wins a round only when this much faster than the other GEMM, so a tie does not flip between starts
# (bfloat16 lm_head of opt-125m at 4 rows on a Zen 4: the two 1-3% apart, the kernel chosen in 4 loads of 6)
SKINNY_MARGIN = 1.05
# (against MKL's dense GEMM the kernel wins unless the dense one is DENSE_MARGIN faster: the two tied on the clock at
# one row from memory in float32 on an AMX Xeon, and inside a decode step MKL's took 20 ms where the kernel took 11)
SKINNY_ROUNDS = 3  # at most: rounds of the kernel and the other GEMM read in turns, the majority deciding
EVICT_CACHE_FACTOR = 2  # bytes read between timed GEMMs: this many times the largest CPU cache
# weights are timed from memory when they exceed this share of the largest cache: a last-level cache shared with
# other cores (or split into sub-NUMA clusters) holds less than its size (on an AMX Xeon whose sysfs reports a 480 MiB
# L3, a read of 128 MiB ran at 47 GB/s and one of 256 MiB at 23, the memory's rate)
CACHE_HOLDS = 0.25
DEFAULT_CACHE_BYTES = 64 << 20  # the largest CPU cache where sysfs does not say
CACHE_SIZE_FILES = "/sys/devices/system/cpu/cpu0/cache/index*/size"  # each cache level's size, e.g. "32768K"
SAVED_CHOICES = "linear-choices-{key}.json"  # in cpu_kernels.cache_dir(): {"out x in dtype": [min_rows, [batches]]}

log = logging.getLogger("enginetui.linear")


class PackedWeight(torch.Tensor):
    """A dense linear weight `[out_features, in_features]` that also holds its oneDNN-packed copy."""

    _dense: torch.Tensor  # the same storage as a plain tensor: the kernels take it with no dispatch back to this class
    _packed: torch.Tensor  # the weight reordered for oneDNN (an opaque mkldnn tensor)
    _min_rows: int  # batches of this many rows or more use `_packed`, smaller ones the dense weight
    _skinny_batches: frozenset[int]  # batch sizes (rows) that use the C++ kernel

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func is F.linear or func is linear_relu:
            x, weight = args[0], args[1]
            if x.dim() == 2 and isinstance(weight, cls):
                bias = args[2] if len(args) > 2 else (kwargs or {}).get("bias")
                rows = x.shape[0]
                if rows in weight._skinny_batches:
                    return cpu_kernels.skinny_linear_cpu(x.contiguous(), weight._dense, bias, func is linear_relu)
                if rows >= weight._min_rows:
                    attr = "relu" if func is linear_relu else "none"  # relu as a oneDNN post-op
                    return torch.ops.mkldnn._linear_pointwise(x, weight._packed, bias, attr, [], "")
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **(kwargs or {}))
        if func is torch.Tensor.detach:  # nn.Parameter(weight) detaches: keep what it is
            out = out.as_subclass(cls)
            out._dense = out.as_subclass(torch.Tensor)
            out._packed, out._min_rows = args[0]._packed, args[0]._min_rows
            out._skinny_batches = args[0]._skinny_batches
        return out


def linear_backend(device: torch.device) -> str:
    """`onednn` or `torch`: the forced one if the env var is set, else oneDNN on CPU when torch has it."""
    forced = os.environ.get(LINEAR_BACKEND_ENV, "").strip().lower()
    if forced and forced not in LINEAR_BACKENDS:
        raise ValueError(f"{LINEAR_BACKEND_ENV} must be one of {', '.join(LINEAR_BACKENDS)}, got {forced!r}")
    if device.type != "cpu" or not torch.backends.mkldnn.is_available():
        return "torch"
    return forced or "onednn"


def prepare_cpu_model(model: CausalLM, device: torch.device) -> None:
    """After loading: prepack the linear weights when oneDNN is the linear backend for `device`."""
    if linear_backend(device) == "onednn":
        prepack_linear_weights(model, keep=True)


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


def prepack_linear_weights(model: CausalLM, min_rows: int | None = None, time_gemm=None, keep: bool = False) -> int:
    """Give every linear weight of a loaded model (and a tied lm_head's embedding) its packed copy;
    returns how many weights were packed. `min_rows`: the smallest batch that uses the packed copy
    (None: measured on this CPU for each shape of weight, `measure_min_rows` with `time_gemm`, and so is
    the batch sizes that use the C++ kernel, `measure_skinny_batches`; given, the kernel is not used).
    `keep`: with the default clock, read the choices saved by an earlier start (`saved_choices_path`) and save
    the ones measured now."""
    owners: list[Linear | nn.Linear | nn.Embedding] = [m for m in model.modules() if isinstance(m, (Linear, nn.Linear))]
    if getattr(model, "tie_word_embeddings", False):
        owners.append(model.get_input_embeddings())  # compute_logits runs F.linear on its weight
    owners = [m for m in owners if m.weight.dim() == 2 and packable(m.weight.dtype)]
    saved = None
    if min_rows is None and time_gemm is None:  # one clock for every shape (its buffer freed with it)
        weight_bytes, cache_bytes = sum(m.weight.nbytes for m in owners), largest_cache_bytes()
        time_gemm = GemmClock(cache_bytes if weight_bytes > CACHE_HOLDS * cache_bytes else None)
        saved = saved_choices_path(time_gemm.cache_bytes) if keep else None
    measured = read_choices(saved) if saved is not None else {}  # "out x in dtype" -> (min_rows, skinny batches)
    known, started = len(measured), time.perf_counter()
    for module in owners:
        weight = _packed_weight(module.weight.data)
        key = f"{weight.shape[0]}x{weight.shape[1]} {weight.dtype}"
        if min_rows is None and key not in measured:
            weight._min_rows = measure_min_rows(weight, time_gemm)
            measured[key] = (weight._min_rows, measure_skinny_batches(weight, time_gemm))
        weight._min_rows, weight._skinny_batches = (min_rows, frozenset()) if min_rows is not None else measured[key]
        module.weight = nn.Parameter(weight, requires_grad=False)
    if saved is not None and len(measured) > known:
        log.info(
            "linear layers: GEMMs of %d shapes timed in %.1f s", len(measured) - known, time.perf_counter() - started
        )
        write_choices(saved, measured)
    return len(owners)


def saved_choices_path(cache_bytes: int | None) -> Path:
    """The file of choices measured on this machine by this code, for this torch, kernel build, emulated instruction
    set (kernels/cpu_isa.py) and thread count, timed from memory (`cache_bytes`: the cache emptied) or from the
    caches (None)."""
    parts = (
        Path(__file__).read_bytes(),
        cpu_kernels.build_id(),
        cpu_isa.emulated(),
        torch.__version__,
        torch.get_num_threads(),
        cache_bytes,
    )
    key = hashlib.sha256(repr(parts).encode()).hexdigest()[:16]
    return cpu_kernels.cache_dir() / SAVED_CHOICES.format(key=key)


def read_choices(path: Path) -> dict[str, tuple[int, frozenset[int]]]:
    """The choices saved in `path`; none where it is missing or unreadable (they are measured again)."""
    try:
        with open(path) as f:
            return {key: (int(rows), frozenset(map(int, batches))) for key, (rows, batches) in json.load(f).items()}
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        log.warning("linear layers: ignoring the saved GEMM choices in %s (%s): measuring them again", path, exc)
        return {}


def write_choices(path: Path, choices: dict[str, tuple[int, frozenset[int]]]) -> None:
    """Save `choices` to `path` whole (a reader never sees half a file); a folder that cannot be written costs
    only the saving."""
    data = {key: [rows, sorted(batches)] for key, (rows, batches) in choices.items()}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text("{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in data.items()) + "\n}\n")
        os.replace(partial, path)
    except OSError as exc:
        log.warning("linear layers: could not save the GEMM choices to %s (%s)", path, exc)


def measure_min_rows(weight: "PackedWeight", time_gemm=None) -> int:
    """The smallest batch (1, 2 or MAX_MIN_ROWS rows) from which oneDNN's packed GEMM on `weight`
    is as fast as the dense one on this CPU, with this thread count (under a second).
    `time_gemm(weight, rows, packed)`: seconds of one such GEMM (default: a `GemmClock` from memory).
    The two are read in turns, MEASURE_ROUNDS times each, the fastest reading kept, so a slow spell of the
    machine falls on both; the dense GEMM must win by DENSE_MARGIN (a near tie on the clock once left a
    layer's out_proj on the dense GEMM, 2.3x slower inside a decode step on a Zen 5 EPYC)."""
    time_gemm = time_gemm or GemmClock(largest_cache_bytes())
    for rows in range(1, MAX_MIN_ROWS):
        packed, dense = float("inf"), float("inf")
        for _ in range(MEASURE_ROUNDS):
            packed = min(packed, time_gemm(weight, rows, "packed"))
            dense = min(dense, time_gemm(weight, rows, "dense"))
        if packed <= DENSE_MARGIN * dense:
            return rows
    return MAX_MIN_ROWS


def measure_skinny_batches(weight: "PackedWeight", time_gemm=None) -> frozenset[int]:
    """The batch sizes at which the C++ kernel beats the GEMM `weight._min_rows` picks, timed at each of SKINNY_ROWS
    (each deciding for the sizes above the one before it); none where the kernel is not built or the weight is
    neither float32 nor bfloat16. Each round reads the two in turns and goes to the kernel only if it is
    SKINNY_MARGIN faster than oneDNN's, or unless MKL's dense GEMM is DENSE_MARGIN faster than it; the majority
    of SKINNY_ROUNDS rounds decides (two that agree end it), so one slow reading does not."""
    if weight.dtype not in (torch.float32, torch.bfloat16) or not cpu_kernels.available():
        return frozenset()
    time_gemm = time_gemm or GemmClock(largest_cache_bytes())
    batches: set[int] = set()
    for smaller, rows in zip((0, *SKINNY_ROWS), SKINNY_ROWS):
        other = "packed" if rows >= weight._min_rows else "dense"
        wins = losses = 0
        while max(wins, losses) <= SKINNY_ROUNDS // 2:
            skinny = time_gemm(weight, rows, "skinny")
            theirs = time_gemm(weight, rows, other)
            if (SKINNY_MARGIN * skinny < theirs) if other == "packed" else (skinny < DENSE_MARGIN * theirs):
                wins += 1
            else:
                losses += 1
        if wins > losses:
            batches.update(range(smaller + 1, rows + 1))
    return frozenset(batches)


class GemmClock:
    """Times one GEMM of `rows` rows by a `PackedWeight`, packed (oneDNN), dense or skinny (the C++ kernel), as a
    decode step runs it. A step reads each weight once: from memory when the model's linear weights exceed
    CACHE_HOLDS of the largest cache, and then, before each timed run, the clock reads a buffer of twice that
    cache, so neither the weight nor the other GEMM's copy of it is left in a cache (a layer's weight of a few MB
    fits the last-level cache, where the two GEMMs time alike); a model that fits the cache is timed from it.
    `cache_bytes`: the largest cache's size, or None to time from the caches."""

    def __init__(self, cache_bytes: int | None) -> None:
        self.cache_bytes = cache_bytes  # the largest cache's bytes (None: do not empty the caches)
        self._evict: torch.Tensor | None = None  # [EVICT_CACHE_FACTOR x cache_bytes / 4] fp32, made at first use

    def __call__(self, weight: "PackedWeight", rows: int, path: str) -> float:
        """Seconds of the fastest of TIMED_RUNS GEMMs by `path` (packed, dense or skinny), after one untimed run."""
        dense = weight.as_subclass(torch.Tensor)  # [out_features, in_features]
        x = torch.full((rows, dense.shape[1]), 0.5, dtype=dense.dtype)  # [rows, in_features] (no RNG drawn)
        if path == "packed":
            run = lambda: torch.ops.mkldnn._linear_pointwise(x, weight._packed, None, "none", [], "")  # noqa: E731
        elif path == "skinny":
            run = lambda: cpu_kernels.skinny_linear_cpu(x, dense, None)  # noqa: E731
        else:
            run = lambda: F.linear(x, dense)  # noqa: E731
        run()
        best = float("inf")
        for _ in range(TIMED_RUNS):
            if self.cache_bytes is not None:
                self._empty_caches()
            start = time.perf_counter()
            run()
            best = min(best, time.perf_counter() - start)
        return best

    def _empty_caches(self) -> None:
        if self._evict is None:
            assert self.cache_bytes is not None  # called only with a cache size
            self._evict = torch.ones(EVICT_CACHE_FACTOR * self.cache_bytes // 4)
        self._evict.sum()  # reads every byte: the caches now hold the buffer


def largest_cache_bytes() -> int:
    """The size of this CPU's largest cache (cpu0's, from sysfs), else DEFAULT_CACHE_BYTES."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    sizes = []
    for path in glob.glob(CACHE_SIZE_FILES):
        try:
            with open(path) as f:
                text = f.read().strip()
            sizes.append(int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text))
        except (OSError, ValueError, IndexError):
            continue
    return max(sizes, default=DEFAULT_CACHE_BYTES)


def _packed_weight(dense: torch.Tensor) -> PackedWeight:
    weight = dense.as_subclass(PackedWeight)
    weight._dense = dense
    weight._packed = torch.ops.mkldnn._reorder_linear_weight(dense, PACK_FOR_ROWS)
    weight._min_rows = MAX_MIN_ROWS
    weight._skinny_batches = frozenset()
    return weight
