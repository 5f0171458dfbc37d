"""Configs of well-known checkpoints, so `--load-format dummy` works offline for them by name."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import OPTConfig

_OPT_SIZES = {  # name -> (hidden, layers, heads, ffn, word_embed_proj_dim, pre-LN)
    "facebook/opt-125m": (768, 12, 12, 3072, 768, True),
    "facebook/opt-350m": (1024, 24, 16, 4096, 512, False),
    "facebook/opt-1.3b": (2048, 24, 32, 8192, 2048, True),
}
KNOWN_NAMES = tuple(_OPT_SIZES)  # the model names with a built-in config (no transformers needed to list them)


def known_config(name: str | None) -> "OPTConfig | None":
    from transformers import OPTConfig

    if name not in _OPT_SIZES:
        return None
    hidden, layers, heads, ffn, proj, pre_ln = _OPT_SIZES[name]
    return OPTConfig(
        vocab_size=50272, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads, ffn_dim=ffn,
        word_embed_proj_dim=proj, do_layer_norm_before=pre_ln, max_position_embeddings=2048,
        architectures=["OPTForCausalLM"], bos_token_id=2, eos_token_id=2, pad_token_id=1,
    )
