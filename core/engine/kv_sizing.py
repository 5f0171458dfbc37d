"""How many KV blocks the pool gets: the override, else what the KV memory budget holds."""

import torch

from core.config import EngineConfig

CPU_DEFAULT_KV_BYTES = 2 * 1024**3  # 2 GiB of KV cache on CPU unless told otherwise
GPU_MEMORY_FRACTION = 0.9  # share of free CUDA memory given to the KV cache by default


def kv_bytes_per_token(model: torch.nn.Module, dtype: torch.dtype) -> int:
    """K and V of one token in every attention layer."""
    per_token = sum(2 * layer.num_kv_heads * layer.head_size for layer in model.attention_layers())
    return per_token * torch.empty((), dtype=dtype).element_size()


def num_kv_blocks(config: EngineConfig, model: torch.nn.Module, dtype: torch.dtype) -> int:
    if config.num_gpu_blocks_override is not None:
        return config.num_gpu_blocks_override
    budget = config.kv_cache_memory_bytes
    if budget is None:
        if config.torch_device.type == "cuda":
            free, _ = torch.cuda.mem_get_info(config.torch_device)
            budget = int(free * GPU_MEMORY_FRACTION)
        else:
            budget = CPU_DEFAULT_KV_BYTES
    blocks = budget // (kv_bytes_per_token(model, dtype) * config.block_size)
    if blocks < 1:
        raise ValueError(f"KV cache budget of {budget} bytes holds no block; raise kv_cache_memory_bytes")
    return int(blocks)
