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
        vocab_size=50272,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        ffn_dim=ffn,
        word_embed_proj_dim=proj,
        do_layer_norm_before=pre_ln,
        max_position_embeddings=2048,
        architectures=["OPTForCausalLM"],
        bos_token_id=2,
        eos_token_id=2,
        pad_token_id=1,
    )


# Public configs of the 8B models people serve (config.json on the hub): the GPU checks build them with random
# weights (tools/graph_check.py, kernels/gpu_session.sh).
SHAPES = {
    "llama-3.1-8b": dict(
        model_type="llama", architectures=["LlamaForCausalLM"], vocab_size=128256, hidden_size=4096,
        intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
        max_position_embeddings=131072, rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False,
        rope_scaling={"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        bos_token_id=128000, eos_token_id=128001, torch_dtype="bfloat16"),
    "qwen3-8b": dict(
        model_type="qwen3", architectures=["Qwen3ForCausalLM"], vocab_size=151936, hidden_size=4096,
        intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
        max_position_embeddings=40960, rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=False,
        bos_token_id=151643, eos_token_id=151645, torch_dtype="bfloat16"),
}  # fmt: skip


def shape_dir(name: str, root: str) -> str:
    """A model directory under `root` holding only the public config of SHAPES[name] (weights: --load-format dummy)."""
    import os

    from transformers import AutoConfig

    fields = dict(SHAPES[name])
    path = os.path.join(root, name)
    AutoConfig.for_model(str(fields.pop("model_type")), **fields).save_pretrained(path)
    return path
