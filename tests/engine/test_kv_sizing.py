"""The KV pool's size: the override, else the memory asked for (vLLM's --kv-cache-memory-bytes, its
VLLM_CPU_KVCACHE_SPACE, its --gpu-memory-utilization), else what max_num_seqs requests of
max_model_len tokens use, capped by a memory budget; the rule is reported with the size."""

from types import SimpleNamespace

import pytest

from enginetui.core.config import ConfigError, EngineConfig
from enginetui.core.engine.kv_sizing import size_kv_pool

GiB = 1024**3
TINY = 4096  # KV bytes per token of the embedded model (4 layers x K and V x 128 x float32)
OPT_125M = 73728  # of facebook/opt-125m in float32 (12 layers x K and V x 768 x 4 bytes)


@pytest.fixture(autouse=True)
def machine(monkeypatch):
    """A machine with 64 GiB of RAM, 48 GiB of it available, and no VLLM_CPU_KVCACHE_SPACE."""
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    memory = SimpleNamespace(total=64 * GiB, available=48 * GiB)
    monkeypatch.setattr("psutil.virtual_memory", lambda: memory)
    monkeypatch.setattr("psutil.Process", lambda: SimpleNamespace(memory_info=lambda: SimpleNamespace(rss=GiB)))
    return memory


def cpu(**kwargs) -> EngineConfig:
    return EngineConfig(device="cpu", **kwargs)


def test_a_tiny_model_gets_what_its_requests_can_use():
    pool = size_kv_pool(cpu(), TINY, max_model_len=512)
    assert pool.num_blocks == 256 * 512 // 16 and pool.rule == "256 seqs x 512 tok"  # 8,192 blocks = 512 MiB
    pool = size_kv_pool(cpu(max_num_seqs=4, block_size=32), TINY, max_model_len=500)
    assert pool.num_blocks == 4 * 16 and pool.rule == "4 seqs x 500 tok"  # 500 tokens take 16 blocks of 32


def test_a_larger_model_is_capped_by_the_cpu_budget(machine):
    pool = size_kv_pool(cpu(), OPT_125M, max_model_len=2048)
    assert pool.num_blocks == 2 * GiB // (OPT_125M * 16) == 1820
    assert pool.rule == "2.0 GiB CPU budget, < 256 seqs x 2,048 tok"
    machine.available = 4 * GiB  # a small machine: a quarter of what is available
    pool = size_kv_pool(cpu(), OPT_125M, max_model_len=2048)
    assert pool.num_blocks == GiB // (OPT_125M * 16) and pool.rule.startswith("1/4 of 4.0 GiB free RAM")


def test_memory_asked_for_sizes_the_pool(monkeypatch):
    pool = size_kv_pool(cpu(kv_cache_memory_bytes=GiB), TINY, max_model_len=512)
    assert pool.num_blocks == GiB // (TINY * 16) and pool.rule == "--kv-cache-memory-bytes 1.0 GiB"
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "3")
    pool = size_kv_pool(cpu(), TINY, max_model_len=512)
    assert pool.num_blocks == 3 * GiB // (TINY * 16) and pool.rule == "VLLM_CPU_KVCACHE_SPACE=3"
    assert size_kv_pool(cpu(kv_cache_memory_bytes=GiB), TINY, 512).rule.startswith("--kv-cache-memory-bytes")
    assert size_kv_pool(cpu(num_gpu_blocks_override=48, kv_cache_memory_bytes=GiB), TINY, 512).num_blocks == 48


def test_gpu_memory_utilization_is_a_share_of_all_memory_less_what_is_used():
    pool = size_kv_pool(cpu(gpu_memory_utilization=0.5), OPT_125M, max_model_len=2048)
    assert pool.num_blocks == (32 * GiB - GiB) // (OPT_125M * 16)  # half of 64 GiB, less the 1 GiB resident
    assert pool.rule == "0.5 of 64.0 GiB RAM"


def test_a_budget_that_holds_no_block_says_what_to_change():
    with pytest.raises(ValueError, match="holds no block.*--kv-cache-memory-bytes"):
        size_kv_pool(cpu(kv_cache_memory_bytes=1000), TINY, max_model_len=512)


@pytest.mark.parametrize(
    ("field", "value"), [("gpu_memory_utilization", 0), ("gpu_memory_utilization", 1.2), ("kv_cache_memory_bytes", 0)]
)
def test_bad_memory_settings_are_refused_by_the_config(field, value):
    with pytest.raises(ConfigError) as info:
        EngineConfig(**{field: value})
    assert info.value.field == field


def test_vllm_cpu_kvcache_space_must_be_whole_gib(monkeypatch):
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1.5")
    with pytest.raises(ConfigError, match="VLLM_CPU_KVCACHE_SPACE must be a whole number of GiB"):
        EngineConfig()
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "0")  # vLLM's "size it for me": our default rule
    assert size_kv_pool(cpu(), TINY, 512).rule == "256 seqs x 512 tok"


def test_the_engine_reports_its_pool_and_rule_and_the_model_panel_shows_both():
    from enginetui.core import LLM
    from enginetui.dashboard.widgets.model_panel import model_items

    llm = LLM(max_num_seqs=4, multiprocess=False, skip_tokenizer_init=True)
    try:
        info = llm.engine.info
        assert info.num_blocks == 4 * 512 // 16 and info.kv_pool_rule == "4 seqs x 512 tok"
        shown = [item.plain for item in model_items(info, random_weights=False)]
        assert "pool 2,048 tok = 8.0 MiB" in shown and shown[-1] == "sized by 4 seqs x 512 tok"
    finally:
        llm.shutdown()


def test_on_cuda_the_default_is_vllms_utilization_less_the_weights_and_headroom(monkeypatch):
    import torch

    total, weights = 80 * GiB, 2 * GiB
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (total - weights, total))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device: weights)
    config = SimpleNamespace(
        num_gpu_blocks_override=None,
        kv_cache_memory_bytes=None,
        gpu_memory_utilization=None,
        block_size=16,
        max_num_seqs=256,
        torch_device=torch.device("cuda", 0),
    )
    budget = int(total * 0.92) - weights - int(total * 0.05)
    pool = size_kv_pool(config, 2 * 1024**2, max_model_len=4096)  # 2 MiB a token: 256 x 4096 tokens would be 2 TiB
    assert (
        pool.num_blocks == budget // (2 * 1024**2 * 16)
        and pool.rule == "0.92 of 80.0 GiB GPU memory, < 256 seqs x 4,096 tok"
    )
    assert size_kv_pool(config, TINY, max_model_len=512).num_blocks == 256 * 32  # a tiny model: what it can use
    config.gpu_memory_utilization = 0.5  # asked for: all of it, as vLLM
    pool = size_kv_pool(config, TINY, max_model_len=512)
    assert pool.num_blocks == (int(total * 0.5) - weights - int(total * 0.05)) // (TINY * 16)
    assert pool.rule == "0.5 of 80.0 GiB GPU memory"
