"""Linear layers, including fused ones whose checkpoint holds the parts apart (q/k/v, gate/up)."""

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import handle_torch_function, has_torch_function

from enginetui.core.models.layers.weight_loading import (
    default_weight_loader,
    set_weight_loader,
    transposed_weight_loader,
)


class Linear(nn.Module):
    """y = x W^T + b with W `[out_features, in_features]`; `conv1d_checkpoint` loads GPT-2's `[in, out]` weights."""

    def __init__(self, in_features: int, out_features: int, bias: bool, conv1d_checkpoint: bool = False) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features), requires_grad=False)  # [out, in]
        self.bias = nn.Parameter(torch.empty(out_features), requires_grad=False) if bias else None  # [out]
        if conv1d_checkpoint:
            set_weight_loader(self.weight, transposed_weight_loader)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [num_tokens, in_features] -> [num_tokens, out_features]."""
        return F.linear(x, self.weight, self.bias)


def linear_relu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """relu(x W^T + b), x: [num_tokens, in_features] -> [num_tokens, out_features]. One function, so a
    weight that overrides it (core/worker/cpu_linear.PackedWeight) runs the GEMM with relu fused in."""
    if has_torch_function((x, weight)):
        return handle_torch_function(linear_relu, (x, weight), x, weight, bias)
    return torch.relu_(F.linear(x, weight, bias))


class MergedLinear(Linear):
    """Several linear layers over the same input, fused along the output; each part is a checkpoint
    shard loaded into its own rows (shard ids in the order of `part_sizes`)."""

    def __init__(self, in_features: int, part_sizes: dict[str | int, int], bias: bool) -> None:
        super().__init__(in_features, sum(part_sizes.values()), bias)
        self.part_rows: dict[str | int, tuple[int, int]] = {}  # shard id -> (first row, rows)
        start = 0
        for shard_id, size in part_sizes.items():
            self.part_rows[shard_id] = (start, size)
            start += size
        for param in (self.weight, self.bias):
            if param is not None:
                set_weight_loader(param, self.load_part, shards=tuple(part_sizes))

    def load_part(self, param: torch.Tensor, loaded: torch.Tensor, shard_id: str | int) -> None:
        start, size = self.part_rows[shard_id]
        default_weight_loader(param.data.narrow(0, start, size), loaded)


class QKVLinear(MergedLinear):
    """The fused q, k, v projections of grouped-query attention; output `[q | k | v]`."""

    def __init__(self, hidden: int, num_heads: int, num_kv_heads: int, head_size: int, bias: bool) -> None:
        self.q_size = num_heads * head_size  # query channels
        self.kv_size = num_kv_heads * head_size  # key (and value) channels
        super().__init__(hidden, {"q": self.q_size, "k": self.kv_size, "v": self.kv_size}, bias)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # type: ignore[override]  # the fused projection's parts
        """x: [num_tokens, hidden] -> q [num_tokens, q_size], k and v [num_tokens, kv_size]."""
        return F.linear(x, self.weight, self.bias).split([self.q_size, self.kv_size, self.kv_size], dim=-1)
