"""Per-parameter weight loaders: how a checkpoint tensor lands in a parameter.

A parameter may carry `weight_loader(param, tensor[, shard_id])` (set by the layer that owns it)
and `shards` (the shard ids a fused parameter is loaded from: every one must be loaded).
Parameters without a loader take the checkpoint tensor as it is. Copies convert to the
parameter's dtype and device one tensor at a time.
"""

from collections.abc import Callable

import torch


def default_weight_loader(param: torch.Tensor, loaded: torch.Tensor) -> None:
    """Copy a tensor of the parameter's own shape."""
    if param.shape != loaded.shape:
        raise ValueError(f"shape {tuple(loaded.shape)} does not fit parameter of shape {tuple(param.shape)}")
    param.data.copy_(loaded)


def transposed_weight_loader(param: torch.Tensor, loaded: torch.Tensor) -> None:
    """Copy a `[in, out]` Conv1D weight (GPT-2) into a `[out, in]` linear weight."""
    default_weight_loader(param, loaded.t())


def set_weight_loader(param: torch.nn.Parameter, loader: Callable, shards: tuple = ()) -> None:
    """Attach a loader (and the shard ids of a fused parameter) to `param`."""
    param.weight_loader = loader  # type: ignore[attr-defined]  # a Parameter takes attributes; its stubs declare none
    param.shards = shards  # type: ignore[attr-defined]


def weight_loader(param: torch.Tensor) -> Callable:
    return getattr(param, "weight_loader", default_weight_loader)


def shards(param: torch.Tensor) -> tuple:
    return getattr(param, "shards", ())
