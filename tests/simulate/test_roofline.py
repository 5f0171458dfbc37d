"""The roofline model and the KV pool sizing against figures worked out by hand."""

import pytest

from enginetui.core.sched.step_shape import StepShape
from enginetui.simulate.hardware import GIB, accelerator
from enginetui.simulate.memory import size_pool
from enginetui.simulate.model_shape import load_model_shape, shipped_models
from enginetui.simulate.roofline import RooflineModel, RooflineParams


def test_shipped_configs_have_the_published_parameter_counts():
    assert shipped_models() == ["llama-3.1-70b", "llama-3.1-8b", "opt-125m", "qwen3-8b"]
    counts = {name: load_model_shape(name).num_params / 1e9 for name in shipped_models()}
    assert counts["llama-3.1-8b"] == pytest.approx(8.03, abs=0.01)
    assert counts["llama-3.1-70b"] == pytest.approx(70.55, abs=0.05)
    assert counts["qwen3-8b"] == pytest.approx(8.19, abs=0.01)  # 8.2B in Qwen's card
    assert counts["opt-125m"] == pytest.approx(0.125, abs=0.003)
    assert load_model_shape("meta-llama/Llama-3.1-8B").num_layers == 32  # an org prefix is ignored


def test_a_config_json_directory_is_read(tmp_path, tiny_opt_dir):
    shape = load_model_shape(tiny_opt_dir)
    assert (shape.num_layers, shape.hidden_size, shape.intermediate_size, shape.gated_mlp) == (2, 64, 128, False)
    with pytest.raises(ValueError, match="not a shipped config"):
        load_model_shape(str(tmp_path / "nowhere"))


def test_a_decode_step_is_bandwidth_bound_and_a_long_prefill_compute_bound():
    m, hw = load_model_shape("llama-3.1-8b"), accelerator("h100")
    model = RooflineModel(RooflineParams(m, hw, mfu=0.5, mbu=0.8, overhead_s=0.0))
    # one request decoding at context 1000: weights + its KV are read once
    decode = StepShape(1, 1, 0, 1, 1, 1000, 0, 0)
    weight_bytes = (m.matmul_params + m.hidden_size * m.vocab_size) * 2
    kv_bytes = (1000 + 1) * 2 * 32 * 8 * 128 * 2
    assert model.step_seconds(decode) == pytest.approx((weight_bytes + kv_bytes) / (3.35e12 * 0.8))
    # 8192 prompt tokens in one chunk: 2 FLOPs per weight per token plus causal attention
    prefill = StepShape(1, 1, 8192, 0, 1, 0, 8192, 8192 * 8193 // 2)
    flops = 2 * m.matmul_params * 8192 + 2 * 4096 * 128256 + 4 * 32 * 128 * 32 * (8192 * 8193 // 2)
    assert model.step_seconds(prefill) == pytest.approx(flops / (989.4e12 * 0.5))


def test_tensor_parallelism_divides_the_work_and_adds_all_reduces():
    m, hw = load_model_shape("llama-3.1-70b"), accelerator("h100")
    one = RooflineModel(RooflineParams(m, hw, tp=1, overhead_s=0.0))
    four = RooflineModel(RooflineParams(m, hw, tp=4, overhead_s=0.0))
    shape = StepShape(1, 64, 0, 64, 64, 64 * 500, 0, 0)
    allreduce = 2 * 80 * (64 * 8192 * 2 * 2 * 3 / 4 / 450e9 + 8e-6)
    assert four.step_seconds(shape) == pytest.approx(one.step_seconds(shape) / 4 + allreduce)


def test_the_pool_is_what_memory_leaves_as_vllm_sizes_it():
    m, hw = load_model_shape("llama-3.1-8b"), accelerator("h200")
    pool = size_pool(m, hw, 1, 2, 2, 16, 0.9, 8192, 256)
    budget = int(hw.memory_bytes * 0.9)
    activations = 8192 * (4 * 4096 + 2 * 14336) * 2 + 256 * 128256 * 4
    kv = budget - m.num_params * 2 - activations - 1 * GIB
    assert pool.block_bytes == 16 * 2 * 32 * 8 * 128 * 2  # 2 MiB: 128 KiB per token
    assert pool.num_blocks == kv // pool.block_bytes
    assert 50_000 < pool.num_blocks < 60_000  # ~110 GiB of KV: ~890k tokens
    fp8 = size_pool(m, hw, 1, 1, 1, 16, 0.9, 8192, 256)
    assert fp8.num_blocks > 2 * pool.num_blocks  # half the weights, half the bytes per block


def test_a_model_that_does_not_fit_says_what_to_do():
    m = load_model_shape("llama-3.1-70b")
    with pytest.raises(ValueError, match=r"does not fit: its weights take 131.4 GiB.*--tensor-parallel-size"):
        size_pool(m, accelerator("h100"), 1, 2, 2, 16, 0.9, 8192, 256)
    assert size_pool(m, accelerator("h100"), 2, 2, 2, 16, 0.9, 8192, 256).num_blocks > 0
    with pytest.raises(ValueError, match="unknown hardware 'b300'"):
        accelerator("b300")


def test_the_simulated_pool_follows_the_engines_memory_rules():
    from enginetui.core.engine.kv_sizing import DEFAULT_GPU_MEMORY_UTILIZATION
    from enginetui.simulate.api import SimSettings, simulate

    assert SimSettings().gpu_memory_utilization == DEFAULT_GPU_MEMORY_UTILIZATION == 0.92  # vLLM 0.32's default
    run = dict(model="llama-3.1-8b", hardware="h100", num_prompts=2, input_len=16, output_len=2)
    sized = simulate(**run)
    m = load_model_shape("llama-3.1-8b")
    assert sized.num_blocks == size_pool(m, accelerator("h100"), 1, 2, 2, 16, 0.92, 2048, 256).num_blocks
    given = simulate(**run, kv_cache_memory_bytes=3 * GIB + 5)  # --kv-cache-memory-bytes: whole 2 MiB blocks
    assert given.num_blocks == 3 * GIB // (16 * 2 * 32 * 8 * 128 * 2) == 1536 and given.pool is None
    assert any("--kv-cache-memory-bytes 3.0 GiB" in note for note in given.notes)
    both = simulate(**run, kv_cache_memory_bytes=3 * GIB, num_gpu_blocks_override=100)  # the override wins
    assert both.num_blocks == 100
    with pytest.raises(ValueError, match="holds no block"):
        simulate(**run, kv_cache_memory_bytes=1024)
