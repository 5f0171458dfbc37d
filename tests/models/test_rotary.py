"""Rotary inverse frequencies and cos/sin scaling equal transformers' rope init functions, bit for bit."""

import pytest
import torch
from transformers import LlamaConfig, Qwen3Config
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

from enginetui.core.models.layers.rotary import RotaryEmbedding, rope_parameters

ROPES = {
    "default": {"rope_type": "default", "rope_theta": 10000.0},
    "default-theta1e6": {"rope_type": "default", "rope_theta": 1e6},
    "linear": {"rope_type": "linear", "factor": 4.0, "rope_theta": 10000.0},
    "dynamic": {"rope_type": "dynamic", "factor": 2.5, "rope_theta": 10000.0},
    "llama3.1": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
        "rope_theta": 500000.0,
    },
    "llama3.2": {
        "rope_type": "llama3",
        "factor": 32.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
        "rope_theta": 500000.0,
    },
    "yarn-qwen": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768, "rope_theta": 1e6},
    "yarn-betas-mscale": {
        "rope_type": "yarn",
        "factor": 8.0,
        "original_max_position_embeddings": 4096,
        "beta_fast": 16,
        "beta_slow": 2,
        "mscale": 0.707,
        "mscale_all_dim": 0.707,
        "rope_theta": 10000.0,
    },
    "yarn-attention-factor-untruncated": {
        "rope_type": "yarn",
        "factor": 2.0,
        "attention_factor": 1.3,
        "original_max_position_embeddings": 2048,
        "truncate": False,
        "rope_theta": 10000.0,
    },
}


@pytest.mark.parametrize("head_dim", [64, 80, 128])
@pytest.mark.parametrize("rope", ROPES.values(), ids=ROPES.keys())
def test_inv_freq_and_scaling_equal_transformers(rope, head_dim):
    cfg = LlamaConfig(
        hidden_size=head_dim * 4,
        num_attention_heads=4,
        head_dim=head_dim,
        max_position_embeddings=131072,
        rope_parameters=dict(rope),
    )
    ours = RotaryEmbedding(head_dim, rope_parameters(cfg), cfg.max_position_embeddings)
    if rope["rope_type"] == "default":
        expected, scaling = LlamaRotaryEmbedding.compute_default_rope_parameters(cfg)
    else:
        expected, scaling = ROPE_INIT_FUNCTIONS[rope["rope_type"]](cfg, "cpu")
    assert torch.equal(ours.inv_freq, expected)
    assert ours.attention_scaling == scaling


def test_cos_sin_equal_the_transformers_rotary_module():
    cfg = Qwen3Config(
        hidden_size=256,
        num_attention_heads=4,
        head_dim=64,
        max_position_embeddings=65536,
        rope_parameters={
            "rope_type": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 16384,
            "rope_theta": 1e6,
        },
    )
    positions = torch.tensor([0, 1, 2, 777, 16383, 40000])
    x = torch.zeros(1, 6, 8, dtype=torch.bfloat16)
    from transformers.models.qwen3.modeling_qwen3 import Qwen3RotaryEmbedding

    cos, sin = Qwen3RotaryEmbedding(cfg)(x, positions[None])
    ours = RotaryEmbedding(64, rope_parameters(cfg), cfg.max_position_embeddings)
    our_cos, our_sin = ours.cos_sin(positions, torch.bfloat16)
    assert torch.equal(our_cos, cos[0]) and torch.equal(our_sin, sin[0])


def test_unsupported_rope_is_refused_by_name():
    cfg = LlamaConfig(
        rope_parameters={
            "rope_type": "longrope",
            "rope_theta": 1e4,
            "short_factor": [1.0],
            "long_factor": [1.0],
            "original_max_position_embeddings": 4096,
        }
    )
    with pytest.raises(
        ValueError, match="rope_type 'longrope' is not supported .*default, linear, dynamic, llama3, yarn"
    ):
        rope_parameters(cfg)
