"""Each family's greedy tokens equal transformers' on the same random weights: as a plain batch,
with prefills cut into chunks, and with requests preempted and recomputed."""

import pytest

from tests.models.families import COMMON, make_family_dir
from tests.support.parity import engine_greedy, hf_greedy, mixed_prompts

MAX_TOKENS = 12
PROMPTS = mixed_prompts(5, COMMON["vocab_size"], 1, 70, seed=3)

# name -> (family, config overrides)
VARIANTS = {
    "llama": ("llama", {}),
    "llama-tied-mqa": ("llama", dict(tie_word_embeddings=True, num_key_value_heads=1)),
    "llama-biases": ("llama", dict(attention_bias=True, mlp_bias=True)),
    "llama-head32": ("llama", dict(hidden_size=128, num_attention_heads=4, num_key_value_heads=2)),
    "llama-rope-linear": ("llama", dict(rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0})),
    "llama-rope-dynamic": (
        "llama",
        dict(rope_parameters={"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0}),
    ),
    "llama-rope-llama3": (
        "llama",
        dict(
            rope_parameters={
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 32,
                "rope_theta": 500000.0,
            }
        ),
    ),
    "llama-rope-yarn": (
        "llama",
        dict(
            rope_parameters={
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 64,
                "rope_theta": 10000.0,
            }
        ),
    ),
    "mistral-window16": ("mistral", {}),
    "mistral-window5-head32": ("mistral", dict(sliding_window=5, hidden_size=128)),
    "qwen2": ("qwen2", {}),
    "qwen2-window-layer1": ("qwen2", dict(use_sliding_window=True, sliding_window=12, max_window_layers=1)),
    "qwen3": ("qwen3", {}),
    "qwen3-yarn-tied": (
        "qwen3",
        dict(
            tie_word_embeddings=True,
            rope_parameters={
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 32,
                "rope_theta": 1e6,
            },
        ),
    ),
    "qwen3-attention-bias": ("qwen3", dict(attention_bias=True)),
    "gpt2": ("gpt2", {}),
    "gpt2-inverse-layer-scale-relu": (
        "gpt2",
        dict(scale_attn_by_inverse_layer_idx=True, activation_function="relu", n_inner=96),
    ),
}
# The first variant of each family also runs chunked and preempted on their own.
MAIN = ["llama", "mistral-window16", "qwen2", "qwen3", "gpt2"]


@pytest.fixture(scope="module", params=list(VARIANTS))
def variant(request, tmp_path_factory):
    family, overrides = VARIANTS[request.param]
    model_dir = make_family_dir(tmp_path_factory.mktemp(request.param), family, seed=len(request.param), **overrides)
    return request.param, model_dir, hf_greedy(model_dir, PROMPTS, MAX_TOKENS)


def chunked(events) -> bool:
    return any(0 < r.num_computed_tokens < r.num_prompt_tokens for e in events for r in e.running)


def preempted(events) -> bool:
    return sum(len(e.preempted) for e in events) > 0


def test_greedy_tokens_match_transformers(variant):
    name, model_dir, expected = variant
    got, _ = engine_greedy(model_dir, PROMPTS, MAX_TOKENS)
    assert got == expected
    # Prefills in chunks of 16 tokens, and a pool of 6 blocks of 16 that cannot hold every request.
    got, events = engine_greedy(
        model_dir, PROMPTS, MAX_TOKENS, max_num_batched_tokens=16, num_gpu_blocks_override=6, block_size=16
    )
    assert got == expected
    assert chunked(events) and preempted(events)


@pytest.mark.parametrize("variant", MAIN, indirect=True)
def test_chunked_prefill_alone_matches_transformers(variant):
    _, model_dir, expected = variant
    got, events = engine_greedy(model_dir, PROMPTS, MAX_TOKENS, max_num_batched_tokens=16)
    assert got == expected and chunked(events) and not preempted(events)


@pytest.mark.parametrize("variant", MAIN, indirect=True)
def test_mlps_in_row_slices_match_transformers(variant, monkeypatch):
    """A long batch's MLP runs a slice of rows at a time (core/models/layers/row_chunks.py): here
    slices of 8 rows from 16 on, so every prompt of more than 15 tokens takes that path."""
    from enginetui.core.models.layers import row_chunks

    monkeypatch.setattr(row_chunks, "CHUNK_ROWS", 8)
    monkeypatch.setattr(row_chunks, "MIN_ROWS", 16)
    _, model_dir, expected = variant
    got, _ = engine_greedy(model_dir, PROMPTS, MAX_TOKENS)
    assert got == expected


@pytest.mark.parametrize("variant", MAIN, indirect=True)
def test_preemption_alone_matches_transformers(variant):
    _, model_dir, expected = variant
    got, events = engine_greedy(model_dir, PROMPTS, MAX_TOKENS, num_gpu_blocks_override=10, block_size=8)
    assert got == expected and preempted(events)


def test_triton_kernels_in_the_engine_match_transformers(tmp_path, monkeypatch):
    """The Triton kernels (interpreted on CPU) inside a real model: a head size that is not a
    power of two (80, padded to 128) and a sliding window, chunked and preempted."""
    model_dir = make_family_dir(
        tmp_path, "mistral", seed=11, hidden_size=160, num_attention_heads=2, num_key_value_heads=1, sliding_window=6
    )
    prompts = [PROMPTS[0], PROMPTS[1], PROMPTS[3]]  # 32, 21 and 15 tokens: 3 blocks each at most
    expected = hf_greedy(model_dir, prompts, MAX_TOKENS)
    monkeypatch.setenv("ENGINETUI_ATTENTION_BACKEND", "triton")
    got, events = engine_greedy(
        model_dir, prompts, MAX_TOKENS, max_num_batched_tokens=24, num_gpu_blocks_override=4, block_size=16
    )
    assert got == expected
    assert chunked(events) and preempted(events)
