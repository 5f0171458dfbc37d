"""Tiny random-weight checkpoints of each supported family, built with transformers and saved in
Hugging Face format; weights are drawn wider than transformers' default (initializer_range 0.2)
so that greedy continuations vary instead of repeating one token."""

import torch
from transformers import AutoModelForCausalLM, GPT2Config, LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config

_GQA = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
# family -> (config class, tiny config); GQA wherever the family has it.
FAMILIES = {
    "llama": (LlamaConfig, dict(_GQA, tie_word_embeddings=False)),
    "mistral": (MistralConfig, dict(_GQA, sliding_window=16)),
    "qwen2": (Qwen2Config, dict(_GQA, tie_word_embeddings=True)),  # Qwen2.5's small sizes tie
    "qwen3": (Qwen3Config, dict(_GQA, head_dim=32, tie_word_embeddings=False)),  # heads wider than hidden / heads
    "gpt2": (GPT2Config, dict(n_embd=64, n_layer=2, n_head=4, n_positions=256)),
}
COMMON = dict(vocab_size=512, max_position_embeddings=256, bos_token_id=2, eos_token_id=3, initializer_range=0.2)


def make_family_dir(path, family: str, seed: int = 0, **overrides) -> str:
    """Save a random-weight model of `family` (tiny config + `overrides`) to `path`."""
    config_cls, tiny = FAMILIES[family]
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config_cls(**{**COMMON, **tiny, **overrides}))
    model.eval().save_pretrained(path)
    return str(path)
