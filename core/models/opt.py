"""OPT (the facebook/opt-* family) on the engine's own layers and paged attention.

Inputs are flat `[num_tokens]` ids and positions of a packed batch; attention metadata comes from
the forward context. Weight names follow Hugging Face's `OPTForCausalLM` (q/k/v are fused here).
"""

from collections.abc import Iterable

import torch
from torch import nn

from core.models.attention import PagedAttention

POSITION_OFFSET = 2  # OPT's learned positions start at row 2 of the table


class OPTAttention(nn.Module):
    def __init__(self, hidden: int, num_heads: int, bias: bool) -> None:
        super().__init__()
        head_size = hidden // num_heads
        self.qkv_proj = nn.Linear(hidden, 3 * hidden, bias=bias)  # fused q, k, v projections
        self.out_proj = nn.Linear(hidden, hidden, bias=bias)
        self.attn = PagedAttention(num_heads, num_heads, head_size, head_size**-0.5)
        self.hidden = hidden

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        qkv = self.qkv_proj(x)  # [num_tokens, 3 * hidden]
        q, k, v = qkv.split(self.hidden, dim=-1)  # 3 x [num_tokens, hidden]
        return self.out_proj(self.attn(q, k, v))  # [num_tokens, hidden]


class OPTDecoderLayer(nn.Module):
    def __init__(self, cfg) -> None:
        super().__init__()
        hidden, affine = cfg.hidden_size, cfg.layer_norm_elementwise_affine
        self.pre_norm = cfg.do_layer_norm_before  # pre-LN (most sizes) or post-LN (opt-350m)
        self.self_attn = OPTAttention(hidden, cfg.num_attention_heads, cfg.enable_bias)
        self.self_attn_layer_norm = nn.LayerNorm(hidden, elementwise_affine=affine)
        self.fc1 = nn.Linear(hidden, cfg.ffn_dim, bias=cfg.enable_bias)
        self.fc2 = nn.Linear(cfg.ffn_dim, hidden, bias=cfg.enable_bias)
        self.final_layer_norm = nn.LayerNorm(hidden, elementwise_affine=affine)
        if cfg.activation_function != "relu":
            raise ValueError(f"OPT with activation {cfg.activation_function!r} is not supported (only relu)")

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
        h = residual + self.fc2(torch.relu(self.fc1(h)))  # [num_tokens, hidden]
        if not self.pre_norm:
            h = self.final_layer_norm(h)
        return h


class OPTDecoder(nn.Module):
    def __init__(self, cfg) -> None:
        super().__init__()
        hidden, proj = cfg.hidden_size, cfg.word_embed_proj_dim
        self.embed_tokens = nn.Embedding(cfg.vocab_size, proj)
        self.embed_positions = nn.Embedding(cfg.max_position_embeddings + POSITION_OFFSET, hidden)
        self.project_in = nn.Linear(proj, hidden, bias=False) if proj != hidden else None
        self.project_out = nn.Linear(hidden, proj, bias=False) if proj != hidden else None
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


class OPTForCausalLM(nn.Module):
    """Decoder plus an lm_head tied to the token embedding."""

    def __init__(self, cfg) -> None:
        super().__init__()
        self.config = cfg  # the Hugging Face config
        self.decoder = OPTDecoder(cfg)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return self.decoder(input_ids, positions)  # [num_tokens, word_embed_proj_dim]

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden: [num_logits, proj] -> logits [num_logits, vocab_size] (lm_head tied to embed_tokens)."""
        return hidden @ self.decoder.embed_tokens.weight.t()

    def attention_layers(self) -> list[PagedAttention]:
        return [layer.self_attn.attn for layer in self.decoder.layers]

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Copy Hugging Face-named tensors in, fusing q/k/v; fail on anything missing or unknown."""
        params = dict(self.named_parameters())
        loaded: set[str] = set()
        hidden = self.config.hidden_size
        for name, tensor in weights:
            name = name.removeprefix("model.")
            if name == "lm_head.weight":
                continue  # tied to decoder.embed_tokens.weight
            for i, part in enumerate(("q_proj", "k_proj", "v_proj")):
                if f".self_attn.{part}." in name:
                    target = name.replace(part, "qkv_proj")
                    params[target].data[i * hidden : (i + 1) * hidden].copy_(tensor)
                    loaded.add(f"{target}#{i}")
                    break
            else:
                if name not in params:
                    raise ValueError(f"unexpected weight {name!r} in checkpoint")
                if params[name].shape != tensor.shape:
                    raise ValueError(f"weight {name!r} has shape {tuple(tensor.shape)}, expected {tuple(params[name].shape)}")
                params[name].data.copy_(tensor)
                loaded.add(name)
        expected = {n for n in params if "qkv_proj" not in n} | {
            f"{n}#{i}" for n in params if "qkv_proj" in n for i in range(3)
        }
        missing = sorted(expected - loaded)
        if missing:
            raise ValueError(f"checkpoint is missing {len(missing)} weights, e.g. {missing[:3]}")
