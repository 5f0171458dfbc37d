"""Hugging Face-format OPT directories with random weights, built locally."""

import torch
from transformers import OPTConfig, OPTForCausalLM


def make_opt_dir(path, seed: int = 0, **overrides) -> str:
    """Save a random-weight OPTForCausalLM with the given config overrides to `path`."""
    cfg = dict(
        vocab_size=512,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        ffn_dim=128,
        max_position_embeddings=512,
        word_embed_proj_dim=64,
    )
    cfg.update(overrides)
    torch.manual_seed(seed)
    OPTForCausalLM(OPTConfig(**cfg)).eval().save_pretrained(path)
    return str(path)
