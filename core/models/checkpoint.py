"""Tensors of a Hugging Face checkpoint directory, one at a time, by their checkpoint names.

Safetensors first: the shards `model.safetensors.index.json` lists (its weight map), else every
`*.safetensors` file; PyTorch `*.bin` files otherwise (an index `pytorch_model.bin.index.json` too).
"""

import json
from collections.abc import Iterator
from pathlib import Path

import torch

SAFETENSORS_INDEX = "model.safetensors.index.json"
BIN_INDEX = "pytorch_model.bin.index.json"


class CheckpointError(ValueError):
    """The directory holds no usable weights, or its index names a missing shard."""


def checkpoint_files(model_dir: Path, load_format: str) -> tuple[str, list[Path]]:
    """("safetensors" | "pt", the weight files to read, in order)."""
    if load_format in ("auto", "safetensors"):
        files = _indexed(model_dir, SAFETENSORS_INDEX) or sorted(model_dir.glob("*.safetensors"))
        if files:
            return "safetensors", files
    if load_format in ("auto", "pt"):
        files = _indexed(model_dir, BIN_INDEX) or sorted(
            f for f in model_dir.glob("*.bin") if "training_args" not in f.name
        )
        if files:
            return "pt", files
    kinds = {"auto": "*.safetensors or *.bin", "safetensors": "*.safetensors", "pt": "*.bin"}[load_format]
    raise CheckpointError(f"no weights ({kinds}) found in {model_dir}")


def _indexed(model_dir: Path, index_name: str) -> list[Path]:
    """The shard files an index names, in first-mention order ([] without an index)."""
    index = model_dir / index_name
    if not index.is_file():
        return []
    weight_map = json.loads(index.read_text())["weight_map"]  # tensor name -> shard file name
    files = [model_dir / f for f in dict.fromkeys(weight_map.values())]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise CheckpointError(f"{index} names shards that are not there: {', '.join(missing)}")
    return files


def iter_weights(model_dir: Path, load_format: str) -> Iterator[tuple[str, torch.Tensor]]:
    """(checkpoint name, tensor) pairs; safetensors are read one tensor at a time."""
    kind, files = checkpoint_files(model_dir, load_format)
    if kind == "safetensors":
        from safetensors import safe_open

        for path in files:
            with safe_open(str(path), framework="pt", device="cpu") as f:
                for name in f.keys():
                    yield name, f.get_tensor(name)
    else:
        for path in files:
            yield from torch.load(path, map_location="cpu", weights_only=True).items()
