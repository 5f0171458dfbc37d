"""One loader for every model source: a local HF directory, a hub id through the HF cache,
the embedded default model, or random ("dummy") weights for any config."""

import glob
import os
from pathlib import Path

import torch
from transformers import AutoConfig, PretrainedConfig

from core.config import EngineConfig
from core.models.known_configs import known_config
from core.models.registry import model_class

WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.json", "*.txt", "*.model")  # files fetched for a hub id


class ModelLoadError(ValueError):
    """A model could not be found or loaded; the message says what to do."""


def default_model_dir() -> Path:
    from core.models.default_model import DEFAULT_MODEL_DIR

    return DEFAULT_MODEL_DIR


def resolve_model_dir(model: str | None, need_weights: bool = True) -> Path | None:
    """A local directory for `model`: itself if it is one, else the HF cache (or hub) snapshot.

    Returns None only for a hub id that is not available when `need_weights` is False.
    """
    if model is None:
        return default_model_dir()
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelLoadError(f"{path} is a directory but has no config.json: not a Hugging Face model directory")
        return path
    if _looks_like_path(model):
        raise ModelLoadError(f"model path {model!r} does not exist")
    return _from_hub_cache(model, need_weights)


def _looks_like_path(model: str) -> bool:
    """A hub id is `name` or `org/name`; anything else that isn't a directory is a missing path."""
    return model.startswith((".", "/", "~")) or model.count("/") > 1


def _from_hub_cache(repo_id: str, need_weights: bool) -> Path | None:
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo_id, local_files_only=True, allow_patterns=list(WEIGHT_PATTERNS)))
    except Exception:
        pass
    offline = os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes")
    if not offline:
        try:
            return Path(snapshot_download(repo_id, allow_patterns=list(WEIGHT_PATTERNS), etag_timeout=3))
        except Exception as exc:  # network down, unknown repo, auth: all end the same way
            reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        else:
            reason = ""
    else:
        reason = "HF_HUB_OFFLINE is set"
    if not need_weights:
        return None
    raise ModelLoadError(
        f"model {repo_id!r} is not a local directory, not in the Hugging Face cache, and the hub could not "
        f"be reached ({reason}). Give a local model directory (--model /path/to/dir), download it first "
        f"on a machine with network (hf download {repo_id}), or run without --model to use "
        f"the embedded default model."
    )


def load_hf_config(config: EngineConfig) -> tuple[PretrainedConfig, Path | None]:
    """The model's HF config and directory (directory None for a dummy model known only by name)."""
    dummy = config.load_format == "dummy"
    model_dir = resolve_model_dir(config.model, need_weights=not dummy)
    if model_dir is not None:
        return AutoConfig.from_pretrained(model_dir), model_dir
    cfg = known_config(config.model)
    if cfg is None:
        raise ModelLoadError(
            f"dummy weights for {config.model!r} need its config.json: it is not cached locally and is not "
            f"one of the built-in configs; give a local directory with a config.json"
        )
    return cfg, None


def load_model(config: EngineConfig, hf_config: PretrainedConfig, model_dir: Path | None) -> torch.nn.Module:
    """Build the model class for `hf_config` and fill its weights (from disk, or random)."""
    cls = model_class(hf_config)
    device = config.torch_device
    dtype = config.torch_dtype(getattr(hf_config, "dtype", None))
    with torch.device(device):
        model = cls(hf_config)
    if config.load_format == "dummy":
        _fill_dummy(model, config.seed)
    else:
        model.load_weights(_iter_weights(model_dir, config.load_format))
    return model.to(dtype=dtype).eval()


def _fill_dummy(model: torch.nn.Module, seed: int) -> None:
    gen = torch.Generator(device="cpu").manual_seed(seed)
    for name, p in model.named_parameters():
        cpu = torch.empty(p.shape, dtype=torch.float32)
        if "norm" in name and name.endswith("weight"):
            cpu.fill_(1.0)
        else:
            cpu.normal_(0.0, 0.02, generator=gen)
        p.data.copy_(cpu)


def _iter_weights(model_dir: Path, load_format: str):
    safetensors = sorted(glob.glob(str(model_dir / "*.safetensors")))
    bins = sorted(f for f in glob.glob(str(model_dir / "*.bin")) if "training_args" not in f)
    if load_format in ("auto", "safetensors") and safetensors:
        from safetensors.torch import load_file

        for f in safetensors:
            yield from load_file(f).items()
    elif load_format in ("auto", "pt") and bins:
        for f in bins:
            yield from torch.load(f, map_location="cpu", weights_only=True).items()
    else:
        raise ModelLoadError(f"no weights (*.safetensors or *.bin) found in {model_dir}")
