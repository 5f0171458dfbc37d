"""GPT-2: learned absolute positions, LayerNorm before each block, fused q/k/v in one projection,
GELU MLP, lm_head tied to the token embedding. Its checkpoints store linear weights as Conv1D,
`[in, out]`: they are transposed on load."""

from typing import cast

import torch
from torch import nn

from enginetui.core.models.contract import CausalLM
from enginetui.core.models.layers.activation import activation, linear_activation
from enginetui.core.models.layers.attention import PagedAttention
from enginetui.core.models.layers.linear import Linear
from enginetui.core.models.layers.row_chunks import by_row_chunks


class GPT2Attention(nn.Module):
    def __init__(self, cfg, layer_idx: int) -> None:
        super().__init__()
        hidden, heads = cfg.n_embd, cfg.n_head
        head_size = hidden // heads
        scale = head_size**-0.5 if cfg.scale_attn_weights else 1.0
        if cfg.scale_attn_by_inverse_layer_idx:
            scale /= layer_idx + 1
        self.c_attn = Linear(hidden, 3 * hidden, bias=True, conv1d_checkpoint=True)  # fused [q | k | v]
        self.c_proj = Linear(hidden, hidden, bias=True, conv1d_checkpoint=True)
        self.attn = PagedAttention(heads, heads, head_size, scale)
        self.hidden = hidden

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """h: [num_tokens, hidden] -> [num_tokens, hidden]."""
        q, k, v = self.c_attn(h).split(self.hidden, dim=-1)  # 3 x [num_tokens, hidden]
        return self.c_proj(self.attn(q, k, v))


class GPT2MLP(nn.Module):
    def __init__(self, cfg) -> None:
        super().__init__()
        inner = cfg.n_inner or 4 * cfg.n_embd
        self.c_fc = Linear(cfg.n_embd, inner, bias=True, conv1d_checkpoint=True)
        self.c_proj = Linear(inner, cfg.n_embd, bias=True, conv1d_checkpoint=True)
        self.act = activation(cfg.activation_function)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """h: [num_tokens, n_embd] -> [num_tokens, n_embd]."""
        return by_row_chunks(self._mlp, h)

    def _mlp(self, h: torch.Tensor) -> torch.Tensor:
        return self.c_proj(linear_activation(self.c_fc, h, self.act))


class GPT2Block(nn.Module):
    def __init__(self, cfg, layer_idx: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.attn = GPT2Attention(cfg, layer_idx)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.mlp = GPT2MLP(cfg)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """h: [num_tokens, hidden] -> [num_tokens, hidden]."""
        h = h + self.attn(self.ln_1(h))
        return h + self.mlp(self.ln_2(h))


class GPT2Model(nn.Module):
    def __init__(self, cfg) -> None:
        super().__init__()
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)  # tokens
        self.wpe = nn.Embedding(cfg.n_positions, cfg.n_embd)  # learned absolute positions
        self.h = nn.ModuleList(GPT2Block(cfg, i) for i in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """input_ids, positions: [num_tokens] -> hidden states [num_tokens, hidden]."""
        h = self.wte(input_ids) + self.wpe(positions)  # [num_tokens, hidden]
        for block in self.h:
            h = block(h)
        return self.ln_f(h)


class GPT2LMHeadModel(CausalLM):
    base_model_prefix = "transformer"
    ignored_weight_suffixes = (".attn.bias", ".attn.masked_bias")  # causal-mask buffers of old checkpoints

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        if getattr(cfg, "add_cross_attention", False):
            raise ValueError("GPT-2 with cross-attention (an encoder-decoder setup) is not supported")
        self.transformer = GPT2Model(cfg)
        self.lm_head = self.make_lm_head(cfg.n_embd)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return self.transformer(input_ids, positions)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.transformer.wte

    def attention_layers(self) -> list[PagedAttention]:
        return [cast(GPT2Block, block).attn.attn for block in self.transformer.h]
