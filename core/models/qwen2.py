"""Qwen2 / Qwen2.5: Llama's blocks with biases on the q, k, v projections, and a sliding window in
the layers the config's `layer_types` mark "sliding_attention" (only with use_sliding_window)."""

from enginetui.core.models.llama import AttentionOptions, LlamaForCausalLM


def layer_window(cfg, layer_idx: int) -> int | None:
    """The sliding window of layer `layer_idx`, or None for full attention."""
    layer_types = getattr(cfg, "layer_types", None)
    if layer_types is None or layer_types[layer_idx] != "sliding_attention":
        return None
    return cfg.sliding_window


class Qwen2ForCausalLM(LlamaForCausalLM):
    @staticmethod
    def attention_options(cfg, layer_idx: int) -> AttentionOptions:
        return AttentionOptions(qkv_bias=True, o_bias=False, sliding_window=layer_window(cfg, layer_idx))
