"""Llama (Llama 2 / 3.x, TinyLlama, SmolLM): RMSNorm before each block, rotary positions,
grouped-query attention, SiLU-and-mul MLP, lm_head tied or not.

Mistral, Qwen2 and Qwen3 are built the same way and differ only in `attention_options`:
biases, per-head q/k norms, sliding windows.
"""

from dataclasses import dataclass
from typing import cast

import torch
from torch import nn

from enginetui.core.models.contract import CausalLM
from enginetui.core.models.layers.activation import SiluAndMulMLP
from enginetui.core.models.layers.attention import PagedAttention
from enginetui.core.models.layers.linear import Linear, QKVLinear
from enginetui.core.models.layers.norm import RMSNorm
from enginetui.core.models.layers.rotary import RotaryEmbedding, apply_rotary, rope_parameters


@dataclass(frozen=True, slots=True)
class AttentionOptions:
    """What one family's attention layer has beyond Llama's."""

    qkv_bias: bool  # q, k, v projections have biases
    o_bias: bool  # the output projection has a bias
    qk_norm: bool = False  # per-head RMSNorm of q and k before the rotation (Qwen3)
    sliding_window: int | None = None  # keys a query sees, itself included (None: all before it)


def head_size(cfg) -> int:
    return getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads


class LlamaAttention(nn.Module):
    def __init__(self, cfg, options: AttentionOptions) -> None:
        super().__init__()
        self.num_heads = cfg.num_attention_heads  # query heads
        self.num_kv_heads = getattr(cfg, "num_key_value_heads", None) or self.num_heads  # key/value heads
        self.head_size = head_size(cfg)  # channels per head
        self.qkv_proj = QKVLinear(cfg.hidden_size, self.num_heads, self.num_kv_heads, self.head_size, options.qkv_bias)
        self.o_proj = Linear(self.num_heads * self.head_size, cfg.hidden_size, options.o_bias)
        self.q_norm = RMSNorm(self.head_size, cfg.rms_norm_eps) if options.qk_norm else None
        self.k_norm = RMSNorm(self.head_size, cfg.rms_norm_eps) if options.qk_norm else None
        self.attn = PagedAttention(
            self.num_heads, self.num_kv_heads, self.head_size, self.head_size**-0.5, options.sliding_window
        )

    def forward(self, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """h: [num_tokens, hidden]; cos, sin: [num_tokens, head_size] -> [num_tokens, hidden]."""
        n = h.shape[0]
        q, k, v = self.qkv_proj(h)
        q = q.view(n, self.num_heads, self.head_size)  # [num_tokens, num_heads, head_size]
        k = k.view(n, self.num_kv_heads, self.head_size)  # [num_tokens, num_kv_heads, head_size]
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        return self.o_proj(self.attn(q.reshape(n, -1), k.reshape(n, -1), v))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, cfg, options: AttentionOptions) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = LlamaAttention(cfg, options)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = SiluAndMulMLP(
            cfg.hidden_size, cfg.intermediate_size, getattr(cfg, "mlp_bias", False), cfg.hidden_act
        )

    def forward(self, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """h: [num_tokens, hidden] -> [num_tokens, hidden]."""
        h = h + self.self_attn(self.input_layernorm(h), cos, sin)
        return h + self.mlp(self.post_attention_layernorm(h))


class LlamaModel(nn.Module):
    def __init__(self, cfg, layer_options: list[AttentionOptions]) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(LlamaDecoderLayer(cfg, options) for options in layer_options)
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.rotary_emb = RotaryEmbedding(head_size(cfg), rope_parameters(cfg), cfg.max_position_embeddings)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """input_ids, positions: [num_tokens] -> hidden states [num_tokens, hidden]."""
        h = self.embed_tokens(input_ids)  # [num_tokens, hidden]
        cos, sin = self.rotary_emb.cos_sin(positions, h.dtype)  # 2 x [num_tokens, head_size], for every layer
        for layer in self.layers:
            h = layer(h, cos, sin)
        return self.norm(h)


class LlamaForCausalLM(CausalLM):
    packed_modules_mapping = {
        ".q_proj.": (".qkv_proj.", "q"),
        ".k_proj.": (".qkv_proj.", "k"),
        ".v_proj.": (".qkv_proj.", "v"),
        ".gate_proj.": (".gate_up_proj.", 0),
        ".up_proj.": (".gate_up_proj.", 1),
    }
    ignored_weight_suffixes = ("rotary_emb.inv_freq",)  # saved by old transformers versions

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        self.model = LlamaModel(cfg, [self.attention_options(cfg, i) for i in range(cfg.num_hidden_layers)])
        self.lm_head = self.make_lm_head(cfg.hidden_size)

    @staticmethod
    def attention_options(cfg, layer_idx: int) -> AttentionOptions:
        """Layer `layer_idx`'s attention: what distinguishes the families built like Llama."""
        bias = getattr(cfg, "attention_bias", False)
        return AttentionOptions(qkv_bias=bias, o_bias=bias)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids, positions)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.embed_tokens

    def attention_layers(self) -> list[PagedAttention]:
        return [cast(LlamaDecoderLayer, layer).self_attn.attn for layer in self.model.layers]
