"""The roofline step-time model: a step takes as long as the slower of its FLOPs at the accelerator's
(derated) peak and its bytes at the (derated) memory bandwidth, plus the tensor-parallel all-reduces
and a fixed per-step overhead.

Per step, with T tokens of which S sample:
    FLOPs = 2 * layer weights * T + 2 * hidden * vocab * S (lm_head on sampled rows)
            + 4 * heads * head_dim * layers * (query-key pairs attended)
    bytes = weights (layers + lm_head) + KV read (every context token of every request) + KV written (T)
    time  = max(FLOPs / (tp * peak * mfu), bytes / (tp * bandwidth * mbu))
            + [tp > 1] 2 * layers * (T * hidden * 2 bytes * 2 (tp - 1) / tp / link + link latency)
            + overhead
"""

from dataclasses import dataclass

from enginetui.core.sched.step_shape import StepShape
from enginetui.simulate.hardware import Accelerator
from enginetui.simulate.model_shape import ModelShape
from enginetui.simulate.step_time import StepTimeModel

DEFAULT_MFU = 0.5  # share of peak FLOP/s a step's matmuls reach
DEFAULT_MBU = 0.8  # share of peak memory bandwidth a step's reads reach
DEFAULT_OVERHEAD_S = 1e-3  # per step: scheduling, input preparation, launches, sampling


@dataclass(frozen=True, slots=True)
class RooflineParams:
    """What the roofline model is given."""

    model: ModelShape  # the architecture
    hardware: Accelerator  # the accelerator (each of the tp GPUs)
    tp: int = 1  # tensor-parallel degree
    weight_bytes: int = 2  # bytes per weight (2: bf16 / fp16, 1: fp8)
    kv_bytes: int = 2  # bytes per KV value
    mfu: float = DEFAULT_MFU  # compute efficiency
    mbu: float = DEFAULT_MBU  # memory-bandwidth efficiency
    overhead_s: float = DEFAULT_OVERHEAD_S  # fixed seconds per step


class RooflineModel(StepTimeModel):
    """Step seconds from the architecture and the accelerator's peaks."""

    def __init__(self, params: RooflineParams) -> None:
        p = params
        if p.tp < 1:
            raise ValueError(f"tensor parallel size must be at least 1, got {p.tp}")
        for name in ("mfu", "mbu"):
            if not 0 < getattr(p, name) <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {getattr(p, name)}")
        if p.overhead_s < 0:
            raise ValueError(f"step overhead must be non-negative, got {p.overhead_s}")
        self.params = p  # the inputs
        m, hw = p.model, p.hardware
        peak = hw.fp8_flops if p.weight_bytes == 1 and hw.fp8_flops else hw.bf16_flops
        self.name = f"roofline {hw.name} x{p.tp}" if p.tp > 1 else f"roofline {hw.name}"
        # Per-unit costs, divided once here (the hot loop multiplies).
        self._s_per_flop = 1.0 / (p.tp * peak * p.mfu)  # seconds per FLOP
        self._s_per_byte = 1.0 / (p.tp * hw.memory_bandwidth * p.mbu)  # seconds per byte
        self._token_flops = 2 * m.matmul_params  # FLOPs per token through the layers
        self._sample_flops = 2 * m.hidden_size * m.vocab_size  # FLOPs per sampled row (lm_head)
        self._pair_flops = 4 * m.num_heads * m.head_dim * m.num_layers  # FLOPs per query-key pair
        self._weight_bytes = (m.matmul_params + m.hidden_size * m.vocab_size) * p.weight_bytes  # read every step
        self._kv_token_bytes = m.kv_elements_per_token * p.kv_bytes  # one token's KV, all layers
        self._allreduce_s_per_token = 0.0  # seconds of all-reduce traffic per token
        self._allreduce_fixed_s = 0.0  # all-reduce latencies per step
        if p.tp > 1:
            per_token_bytes = 2 * m.num_layers * m.hidden_size * 2 * 2 * (p.tp - 1) / p.tp
            self._allreduce_s_per_token = per_token_bytes / hw.link_bandwidth
            self._allreduce_fixed_s = 2 * m.num_layers * hw.link_latency_s

    def step_seconds(self, shape: StepShape) -> float:
        tokens = shape.num_prefill_tokens + shape.num_decode_tokens
        flops = (
            self._token_flops * tokens
            + self._sample_flops * shape.num_sampled
            + self._pair_flops * (shape.decode_context + shape.prefill_attention_pairs)
        )
        kv_tokens = shape.decode_context + shape.prefill_kv_tokens + tokens
        nbytes = self._weight_bytes + self._kv_token_bytes * kv_tokens
        compute = flops * self._s_per_flop
        memory = nbytes * self._s_per_byte
        allreduce = self._allreduce_s_per_token * tokens + self._allreduce_fixed_s if tokens else 0.0
        return (compute if compute > memory else memory) + allreduce + self.params.overhead_s

    def decode_seconds(self, first_step: int, num_reqs: int, contexts):
        """step_seconds of pure-decode steps, vectorized with the same operations in the same order (integers
        exact in int64, then the same float64 products and sums), so the bits agree."""
        import numpy as np

        ctx = np.asarray(contexts, dtype=np.int64)  # [steps]
        flops = self._token_flops * num_reqs + self._sample_flops * num_reqs + self._pair_flops * ctx  # [steps]
        nbytes = self._weight_bytes + self._kv_token_bytes * (ctx + num_reqs)  # [steps]
        compute = flops.astype(np.float64) * self._s_per_flop
        memory = nbytes.astype(np.float64) * self._s_per_byte
        allreduce = self._allreduce_s_per_token * num_reqs + self._allreduce_fixed_s if num_reqs else 0.0
        return np.where(compute > memory, compute, memory) + allreduce + self.params.overhead_s
