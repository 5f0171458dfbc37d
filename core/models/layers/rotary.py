"""Rotary position embeddings and their scaling types, computed as transformers computes them.

Each `*_inv_freq` function returns the inverse frequencies `[head_size // 2]` (fp32) and the factor
applied to cos and sin, with the same operations as transformers' rope init functions
(`modeling_rope_utils`), so positions rotate bit for bit as in the reference.

"dynamic" (dynamic NTK) rescales only for sequences longer than `max_position_embeddings`; the
engine never runs past it (max_model_len is at most that), where it equals unscaled RoPE: this is
what transformers (which recomputes per call) and vLLM (a fixed table) both do there.
"""

import math

import torch

ROPE_TYPES = ("default", "linear", "dynamic", "llama3", "yarn")  # supported `rope_type`s


def _base_inv_freq(base: float, dim: int) -> torch.Tensor:
    """1 / base^(2i / dim), i < dim / 2: [dim // 2] fp32."""
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def default_inv_freq(p: dict, dim: int, max_positions: int) -> tuple[torch.Tensor, float]:
    return _base_inv_freq(p["rope_theta"], dim), 1.0


def linear_inv_freq(p: dict, dim: int, max_positions: int) -> tuple[torch.Tensor, float]:
    return _base_inv_freq(p["rope_theta"], dim) / p["factor"], 1.0


def dynamic_inv_freq(p: dict, dim: int, max_positions: int) -> tuple[torch.Tensor, float]:
    factor, seq_len = p["factor"], max_positions  # sequences never exceed max_positions here
    base = p["rope_theta"] * ((factor * seq_len / max_positions) - (factor - 1)) ** (dim / (dim - 2))
    return _base_inv_freq(base, dim), 1.0


def llama3_inv_freq(p: dict, dim: int, max_positions: int) -> tuple[torch.Tensor, float]:
    inv_freq = _base_inv_freq(p["rope_theta"], dim)
    factor, low, high = p["factor"], p["low_freq_factor"], p["high_freq_factor"]
    old_len = p.get("original_max_position_embeddings", max_positions)
    low_freq_wavelen, high_freq_wavelen = old_len / low, old_len / high
    wavelen = 2 * math.pi / inv_freq  # [dim // 2]
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)  # long waves: divided
    smooth = (old_len / wavelen - low) / (high - low)  # [dim // 2]
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium, smoothed, scaled), 1.0


def yarn_inv_freq(p: dict, dim: int, max_positions: int) -> tuple[torch.Tensor, float]:
    base = p["rope_theta"]
    original = p.get("original_max_position_embeddings", max_positions)
    factor = p.get("factor")
    if factor is None:
        factor = max_positions / original

    def mscale(scale: float, m: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    attention_factor = p.get("attention_factor")
    if attention_factor is None:
        if p.get("mscale") and p.get("mscale_all_dim"):
            attention_factor = float(mscale(factor, p["mscale"]) / mscale(factor, p["mscale_all_dim"]))
        else:
            attention_factor = mscale(factor)
    beta_fast, beta_slow = p.get("beta_fast") or 32, p.get("beta_slow") or 1

    def correction_dim(num_rotations: float) -> float:
        return (dim * math.log(original / (num_rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if p.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # avoid a zero-width ramp
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)  # [dim // 2]
    pos_freqs = base ** (torch.arange(0, dim, 2).float() / dim)  # [dim // 2]
    extrapolation, interpolation = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    keep = 1 - ramp  # share of the unscaled frequency
    return interpolation * (1 - keep) + extrapolation * keep, attention_factor


_INV_FREQ = {
    "default": default_inv_freq,
    "linear": linear_inv_freq,
    "dynamic": dynamic_inv_freq,
    "llama3": llama3_inv_freq,
    "yarn": yarn_inv_freq,
}


def rope_parameters(hf_config) -> dict:
    """The config's RoPE parameters (`rope_type`, `rope_theta`, scaling fields), checked."""
    p = dict(getattr(hf_config, "rope_parameters", None) or {})
    legacy = getattr(hf_config, "rope_scaling", None) or {}  # configs that predate rope_parameters
    p = {**legacy, **p}
    p.setdefault("rope_theta", getattr(hf_config, "rope_theta", 10000.0))
    p["rope_type"] = p.get("rope_type", p.get("type", "default"))
    if p["rope_type"] not in ROPE_TYPES:
        raise ValueError(f"rope_type {p['rope_type']!r} is not supported (supported: {', '.join(ROPE_TYPES)})")
    partial = p.get("partial_rotary_factor", getattr(hf_config, "partial_rotary_factor", None))
    if partial not in (None, 1.0):
        raise ValueError(f"partial_rotary_factor {partial} is not supported (only 1.0: the whole head rotates)")
    return p


class RotaryEmbedding:
    """cos and sin of each position's angles, and the NeoX-style rotation of q and k by them."""

    def __init__(self, head_size: int, params: dict, max_positions: int) -> None:
        with torch.device("cpu"):  # real tensors even while the model is built on the meta device
            inv_freq, scaling = _INV_FREQ[params["rope_type"]](params, head_size, max_positions)
        self.inv_freq = inv_freq  # [head_size // 2] fp32, on the CPU until first used elsewhere
        self.attention_scaling = scaling  # factor on cos and sin (yarn), else 1.0

    def cos_sin(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """positions: [num_tokens] -> cos, sin: [num_tokens, head_size] in `dtype`."""
        if self.inv_freq.device != positions.device:
            self.inv_freq = self.inv_freq.to(positions.device)
        freqs = positions[:, None].float() * self.inv_freq[None, :]  # [num_tokens, head_size // 2]
        emb = torch.cat((freqs, freqs), dim=-1)  # [num_tokens, head_size]
        return (emb.cos() * self.attention_scaling).to(dtype), (emb.sin() * self.attention_scaling).to(dtype)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: [num_tokens, num_heads, head_size]; cos, sin: [num_tokens, head_size] -> rotated x."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)  # rotate_half
    return x * cos[:, None, :] + rotated * sin[:, None, :]
