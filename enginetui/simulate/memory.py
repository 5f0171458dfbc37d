"""The KV pool from device memory, as vLLM sizes it.

vLLM gives the KV cache what is left of `gpu_memory_utilization` x total memory after the weights
and the peak of a profiling forward pass over `max_num_batched_tokens` tokens. Here that peak is
estimated from the shapes (the MLP's widest activations and the fp32 logits of a full batch of
sampled rows) plus a fixed runtime reserve (CUDA context, CUDA graphs, NCCL buffers); each number
is in the breakdown.
"""

from dataclasses import dataclass

from enginetui.simulate.hardware import GIB, Accelerator
from enginetui.simulate.model_shape import ModelShape

RUNTIME_RESERVE_BYTES = 1 * GIB  # CUDA context, CUDA graphs, NCCL: memory torch's profiler does not count


@dataclass(frozen=True, slots=True)
class PoolSizing:
    """How the KV pool's size came about, per GPU."""

    num_blocks: int  # KV blocks in the pool
    block_bytes: int  # bytes one block takes on one GPU
    budget_bytes: int  # gpu_memory_utilization x total memory
    weight_bytes: int  # the model's weights on one GPU
    activation_bytes: int  # the profiling pass's activation peak (estimate)
    reserve_bytes: int  # RUNTIME_RESERVE_BYTES
    kv_bytes: int  # what is left for the KV cache

    def describe(self) -> str:
        gib = lambda b: f"{b / GIB:.1f} GiB"  # noqa: E731
        return (
            f"{self.num_blocks} blocks: {gib(self.budget_bytes)} budget - {gib(self.weight_bytes)} weights - "
            f"{gib(self.activation_bytes)} activations - {gib(self.reserve_bytes)} runtime = "
            f"{gib(self.kv_bytes)} KV"
        )


def kv_block_bytes(model: ModelShape, block_size: int, kv_value_bytes: int, tp: int) -> int:
    """One block's K and V in every layer, on one GPU (KV heads are split over the tensor-parallel GPUs,
    replicated when there are fewer heads than GPUs)."""
    heads_per_gpu = max(1, model.num_kv_heads // tp)
    return 2 * model.num_layers * heads_per_gpu * model.head_dim * kv_value_bytes * block_size


def size_pool(
    model: ModelShape,
    hw: Accelerator,
    tp: int,
    weight_value_bytes: int,
    kv_value_bytes: int,
    block_size: int,
    gpu_memory_utilization: float,
    max_num_batched_tokens: int,
    max_num_seqs: int,
) -> PoolSizing:
    """The pool vLLM would get; ValueError when the weights (or the weights and activations) do not fit."""
    if not 0 < gpu_memory_utilization <= 1:
        raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}")
    budget = int(hw.memory_bytes * gpu_memory_utilization)
    weights = model.num_params * weight_value_bytes // tp
    if weights >= budget:
        raise ValueError(
            f"{model.name} does not fit: its weights take {weights / GIB:.1f} GiB per GPU (tensor parallel {tp}) "
            f"but {gpu_memory_utilization:g} x {hw.memory_bytes / GIB:.1f} GiB = {budget / GIB:.1f} GiB is available on "
            f"{hw.name}: raise --tensor-parallel-size, use --weight-dtype fp8, or a larger accelerator"
        )
    activations = (
        max_num_batched_tokens * (4 * model.hidden_size + 2 * model.intermediate_size // tp) * 2
        + max_num_seqs * model.vocab_size * 4
    )
    block = kv_block_bytes(model, block_size, kv_value_bytes, tp)
    kv = budget - weights - activations - RUNTIME_RESERVE_BYTES
    if kv < block:
        raise ValueError(
            f"no memory is left for the KV cache: {budget / GIB:.1f} GiB budget - {weights / GIB:.1f} GiB weights - "
            f"{activations / GIB:.1f} GiB activations - {RUNTIME_RESERVE_BYTES / GIB:.1f} GiB runtime: raise "
            f"--gpu-memory-utilization or --tensor-parallel-size, or lower --max-num-batched-tokens"
        )
    return PoolSizing(kv // block, block, budget, weights, activations, RUNTIME_RESERVE_BYTES, kv)
