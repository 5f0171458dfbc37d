"""OPT (the facebook/opt-* family): learned positions offset by 2, LayerNorm before (most sizes) or
after (opt-350m) each block, optional projections between embedding and hidden widths."""

from typing import cast

import torch
from torch import nn

from enginetui.core.models.contract import CausalLM
from enginetui.core.models.layers.activation import activation, linear_activation
from enginetui.core.models.layers.attention import PagedAttention
from enginetui.core.models.layers.linear import Linear, QKVLinear
from enginetui.core.models.layers.row_chunks import by_row_chunks

POSITION_OFFSET = 2  # OPT's learned positions start at row 2 of the table


class OPTAttention(nn.Module):
    def __init__(self, hidden: int, num_heads: int, bias: bool) -> None:
        super().__init__()
        head_size = hidden // num_heads
        self.qkv_proj = QKVLinear(hidden, num_heads, num_heads, head_size, bias)  # fused q, k, v projections
        self.out_proj = Linear(hidden, hidden, bias)
        self.attn = PagedAttention(num_heads, num_heads, head_size, head_size**-0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [num_tokens, hidden] -> [num_tokens, hidden]."""
        q, k, v = self.qkv_proj(x)  # 3 x [num_tokens, hidden]
        return self.out_proj(self.attn(q, k, v))


class OPTDecoderLayer(nn.Module):
    def __init__(self, cfg) -> None:
        super().__init__()
        hidden, affine, bias = cfg.hidden_size, cfg.layer_norm_elementwise_affine, cfg.enable_bias
        self.pre_norm = cfg.do_layer_norm_before  # pre-LN (most sizes) or post-LN (opt-350m)
        self.self_attn = OPTAttention(hidden, cfg.num_attention_heads, bias)
        self.self_attn_layer_norm = nn.LayerNorm(hidden, elementwise_affine=affine)
        self.fc1 = Linear(hidden, cfg.ffn_dim, bias)
        self.fc2 = Linear(cfg.ffn_dim, hidden, bias)
        self.final_layer_norm = nn.LayerNorm(hidden, elementwise_affine=affine)
        self.act = activation(cfg.activation_function)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """h: [num_tokens, hidden] -> [num_tokens, hidden]."""
        residual = h
        if self.pre_norm:
            h = self.self_attn_layer_norm(h)
        h = residual + self.self_attn(h)
        if not self.pre_norm:
            h = self.self_attn_layer_norm(h)
        residual = h
        if self.pre_norm:
            h = self.final_layer_norm(h)
        h = residual + by_row_chunks(self._mlp, h)
        if not self.pre_norm:
            h = self.final_layer_norm(h)
        return h

    def _mlp(self, h: torch.Tensor) -> torch.Tensor:
        """h: [num_tokens, hidden] -> [num_tokens, hidden]."""
        return self.fc2(linear_activation(self.fc1, h, self.act))


class OPTDecoder(nn.Module):
    def __init__(self, cfg) -> None:
        super().__init__()
        hidden, proj = cfg.hidden_size, cfg.word_embed_proj_dim
        self.embed_tokens = nn.Embedding(cfg.vocab_size, proj)
        self.embed_positions = nn.Embedding(cfg.max_position_embeddings + POSITION_OFFSET, hidden)
        self.project_in = Linear(proj, hidden, bias=False) if proj != hidden else None
        self.project_out = Linear(hidden, proj, bias=False) if proj != hidden else None
        keep_final_norm = cfg.do_layer_norm_before and not getattr(cfg, "_remove_final_layer_norm", False)
        self.final_layer_norm = (
            nn.LayerNorm(hidden, elementwise_affine=cfg.layer_norm_elementwise_affine) if keep_final_norm else None
        )
        self.layers = nn.ModuleList(OPTDecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """input_ids, positions: [num_tokens] -> hidden states [num_tokens, word_embed_proj_dim]."""
        h = self.embed_tokens(input_ids)  # [num_tokens, proj]
        if self.project_in is not None:
            h = self.project_in(h)  # [num_tokens, hidden]
        h = h + self.embed_positions(positions + POSITION_OFFSET)  # [num_tokens, hidden]
        for layer in self.layers:
            h = layer(h)
        if self.final_layer_norm is not None:
            h = self.final_layer_norm(h)
        if self.project_out is not None:
            h = self.project_out(h)  # [num_tokens, proj]
        return h


class OPTModel(nn.Module):
    def __init__(self, cfg) -> None:
        super().__init__()
        self.decoder = OPTDecoder(cfg)


class OPTForCausalLM(CausalLM):
    packed_modules_mapping = {
        ".q_proj.": (".qkv_proj.", "q"),
        ".k_proj.": (".qkv_proj.", "k"),
        ".v_proj.": (".qkv_proj.", "v"),
    }

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        self.model = OPTModel(cfg)
        self.lm_head = self.make_lm_head(cfg.word_embed_proj_dim)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return self.model.decoder(input_ids, positions)  # [num_tokens, word_embed_proj_dim]

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.decoder.embed_tokens

    def attention_layers(self) -> list[PagedAttention]:
        return [cast(OPTDecoderLayer, layer).self_attn.attn for layer in self.model.decoder.layers]
