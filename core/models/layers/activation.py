"""Activation functions by their Hugging Face config names, and the SiLU-and-mul MLP."""

import torch
import torch.nn.functional as F
from torch import nn

from enginetui.core.models.layers.linear import Linear, MergedLinear, linear_relu
from enginetui.core.models.layers.row_chunks import by_row_chunks

ACTIVATIONS = {
    "relu": torch.relu,
    "gelu": F.gelu,
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),  # GPT-2
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
}


def activation(name: str):
    if name not in ACTIVATIONS:
        raise ValueError(f"activation {name!r} is not supported (supported: {', '.join(ACTIVATIONS)})")
    return ACTIVATIONS[name]


def linear_activation(layer: Linear, x: torch.Tensor, act) -> torch.Tensor:
    """act(layer(x)) for an `activation(...)` act, x: [num_tokens, in_features] -> [num_tokens,
    out_features]; relu in the same call as the GEMM (fused where the weight's backend can)."""
    if act is torch.relu:
        return linear_relu(x, layer.weight, layer.bias)
    return act(layer(x))


class SiluAndMulMLP(nn.Module):
    """down(silu(gate(x)) * up(x)), with gate and up fused into one projection."""

    def __init__(self, hidden: int, intermediate: int, bias: bool, hidden_act: str) -> None:
        super().__init__()
        if hidden_act != "silu":
            raise ValueError(f"gated MLP with activation {hidden_act!r} is not supported (only silu)")
        self.gate_up_proj = MergedLinear(hidden, {0: intermediate, 1: intermediate}, bias)  # [gate | up]
        self.down_proj = Linear(intermediate, hidden, bias)
        self.intermediate = intermediate  # channels of gate and of up

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [num_tokens, hidden] -> [num_tokens, hidden]."""
        return by_row_chunks(self._mlp, x)

    def _mlp(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).split(self.intermediate, dim=-1)  # 2 x [num_tokens, intermediate]
        return self.down_proj(F.silu(gate) * up)
