"""RMSNorm as Llama-family checkpoints define it (LayerNorm is torch's own nn.LayerNorm)."""

import torch
from torch import nn


class RMSNorm(nn.Module):
    """x / rms(x) * weight over the last dimension, computed in fp32 like transformers."""

    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(size), requires_grad=False)  # [size] per-channel gain
        self.eps = eps  # added to the mean square

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [..., size] -> [..., size] in x's dtype."""
        dtype = x.dtype
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(dtype)
