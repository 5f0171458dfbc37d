"""Qwen3: Qwen2's layout without the q/k/v biases (unless attention_bias), with an RMSNorm over
each head of q and of k before the rotation."""

from enginetui.core.models.llama import AttentionOptions, LlamaForCausalLM
from enginetui.core.models.qwen2 import layer_window


class Qwen3ForCausalLM(LlamaForCausalLM):
    @staticmethod
    def attention_options(cfg, layer_idx: int) -> AttentionOptions:
        bias = getattr(cfg, "attention_bias", False)
        return AttentionOptions(qkv_bias=bias, o_bias=bias, qk_norm=True, sliding_window=layer_window(cfg, layer_idx))
