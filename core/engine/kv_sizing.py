"""How many KV blocks the pool gets, and the rule that chose it (shown in the dashboard's model panel).

In order, the first that applies:

1. `num_gpu_blocks_override`: that many blocks.
2. `kv_cache_memory_bytes` (vLLM's `--kv-cache-memory-bytes`), or on CPU `VLLM_CPU_KVCACHE_SPACE`
   (GiB, vLLM's variable): as many blocks as that memory holds.
3. `gpu_memory_utilization` given (vLLM's flag): that share of the device's whole memory, less what
   this process already uses (the weights: on CUDA torch's reserved memory, on CPU the resident set),
   less, on CUDA, a headroom for activations.
4. Otherwise what `max_num_seqs` requests of `max_model_len` tokens can use at once, and no more
   than a memory budget: on CUDA 0.92 of the device's memory less the weights and the headroom
   (vLLM's default utilization), on CPU 2 GiB or a quarter of the memory available, whichever is
   less. A tiny model gets a small pool; a large one the budget.
"""

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from enginetui.core.ceil_div import cdiv
from enginetui.core.config import CPU_KV_SPACE_ENV, EngineConfig, cpu_kv_space_bytes

if TYPE_CHECKING:
    import torch

    from enginetui.core.models.contract import CausalLM

CPU_KV_BUDGET_BYTES = 2 * 1024**3  # the most KV memory a CPU engine takes unless told otherwise
CPU_AVAILABLE_SHARE = 0.25  # ... and at most this share of the memory available when it starts
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92  # vLLM 0.32's default
GPU_ACTIVATION_HEADROOM = 0.05  # share of the device's memory left for activations and the CUDA context


@dataclass(frozen=True, slots=True)
class KVPoolSize:
    """The pool's size and how it was chosen."""

    num_blocks: int  # blocks in the pool
    rule: str  # the rule in a few words, e.g. "256 seqs x 512 tok" or "--kv-cache-memory-bytes 1.0 GiB"


def kv_bytes_per_token(model: "CausalLM", dtype: "torch.dtype") -> int:
    """K and V of one token in every attention layer."""
    import torch

    per_token = sum(2 * layer.num_kv_heads * layer.head_size for layer in model.attention_layers())
    return per_token * torch.empty((), dtype=dtype).element_size()


def size_kv_pool(config: EngineConfig, bytes_per_token: int, max_model_len: int) -> KVPoolSize:
    """The pool for a model whose tokens take `bytes_per_token` of KV (after its weights are loaded:
    the memory rules count them as used)."""
    if config.num_gpu_blocks_override is not None:
        return KVPoolSize(config.num_gpu_blocks_override, "--num-gpu-blocks-override")
    block_bytes = bytes_per_token * config.block_size
    on_cuda = config.torch_device.type == "cuda"
    if config.kv_cache_memory_bytes is not None:
        budget, rule = config.kv_cache_memory_bytes, f"--kv-cache-memory-bytes {gib(config.kv_cache_memory_bytes)}"
    elif not on_cuda and (space := cpu_kv_space_bytes()) is not None:
        budget, rule = space, f"{CPU_KV_SPACE_ENV}={os.environ[CPU_KV_SPACE_ENV].strip()}"
    elif config.gpu_memory_utilization is not None:
        budget, rule = _utilization_budget(config, config.gpu_memory_utilization)
    else:
        budget, budget_rule = (
            _utilization_budget(config, DEFAULT_GPU_MEMORY_UTILIZATION) if on_cuda else _cpu_default_budget()
        )
        blocks_per_seq = cdiv(max_model_len, config.block_size)
        wanted = config.max_num_seqs * blocks_per_seq
        if wanted * block_bytes <= budget:
            return KVPoolSize(wanted, f"{config.max_num_seqs} seqs x {max_model_len:,} tok")
        rule = f"{budget_rule}, < {config.max_num_seqs} seqs x {max_model_len:,} tok"
    return blocks_in_budget(budget, block_bytes, rule)


def blocks_in_budget(budget: int, block_bytes: int, rule: str) -> KVPoolSize:
    """As many whole blocks as `budget` bytes hold (the simulator sizes `--kv-cache-memory-bytes` with it too)."""
    blocks = budget // block_bytes
    if blocks < 1:
        raise ValueError(
            f"the KV cache budget ({rule}: {budget} bytes) holds no block of {block_bytes} bytes; "
            f"give more memory (--kv-cache-memory-bytes, --gpu-memory-utilization) or "
            f"--num-gpu-blocks-override"
        )
    return KVPoolSize(int(blocks), rule)


def _utilization_budget(config: EngineConfig, utilization: float) -> tuple[int, str]:
    """`utilization` of the device's memory less what this process uses already (and headroom on CUDA)."""
    if config.torch_device.type == "cuda":
        import torch

        _, total = torch.cuda.mem_get_info(config.torch_device)
        used = torch.cuda.memory_reserved(config.torch_device) + int(total * GPU_ACTIVATION_HEADROOM)
        return int(total * utilization) - used, f"{utilization:g} of {gib(total)} GPU memory"
    import psutil

    total = psutil.virtual_memory().total
    used = psutil.Process().memory_info().rss
    return int(total * utilization) - used, f"{utilization:g} of {gib(total)} RAM"


def _cpu_default_budget() -> tuple[int, str]:
    import psutil

    available = int(psutil.virtual_memory().available * CPU_AVAILABLE_SHARE)
    if available < CPU_KV_BUDGET_BYTES:
        return available, f"1/4 of {gib(psutil.virtual_memory().available)} free RAM"
    return CPU_KV_BUDGET_BYTES, f"{gib(CPU_KV_BUDGET_BYTES)} CPU budget"


def gib(num_bytes: int) -> str:
    """3221225472 -> "3.0 GiB"."""
    return f"{num_bytes / 1024**3:.1f} GiB"
