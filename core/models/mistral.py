"""Mistral: Llama's blocks with a sliding attention window in every layer (when the config sets one)."""

from enginetui.core.models.llama import AttentionOptions, LlamaForCausalLM


class MistralForCausalLM(LlamaForCausalLM):
    @staticmethod
    def attention_options(cfg, layer_idx: int) -> AttentionOptions:
        return AttentionOptions(qkv_bias=False, o_bias=False, sliding_window=getattr(cfg, "sliding_window", None))
