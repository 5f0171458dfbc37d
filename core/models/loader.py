"""One loader for every model source: a local HF directory, a hub id through the HF cache,
the embedded default model, or random ("dummy") weights for any config.

Finding a model (`resolve_model_dir`, `check_model`) needs neither torch nor transformers, so a
command line can refuse a model that is not there before it starts an engine; they are imported
when a model is built.
"""

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from enginetui.core.config import ConfigError, EngineConfig
from enginetui.core.models.known_configs import KNOWN_NAMES

if TYPE_CHECKING:
    import torch
    from transformers import PretrainedConfig

    from enginetui.core.models.contract import CausalLM

WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.json", "*.txt", "*.model")  # files fetched for a hub id


class ModelLoadError(ValueError):
    """A model could not be found or loaded; the message says what to do."""


def default_model_dir() -> Path:
    from enginetui.core.models.default_model import DEFAULT_MODEL_DIR

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
        reason = "HF_HUB_OFFLINE is set"
    if not need_weights:
        return None
    raise ModelLoadError(
        f"model {repo_id!r} is not a local directory, not in the Hugging Face cache, and the hub could not "
        f"be reached ({reason}). {_dummy_hint(repo_id)}Give a local model directory (--model /path/to/dir), "
        f"download it first on a machine with network (hf download {repo_id}), or run without --model to use "
        f"the embedded default model."
    )


def _dummy_hint(repo_id: str) -> str:
    """How to run `repo_id` with random weights, when its config is built in."""
    if repo_id in KNOWN_NAMES:
        return (
            "To run its architecture with random weights (nothing downloaded), add --load-format dummy "
            '(LLM(..., load_format="dummy")). '
        )
    return (
        f"--load-format dummy runs random weights without a download for a model whose config.json is cached "
        f"or built in ({', '.join(KNOWN_NAMES)}). "
    )


def check_model(config: EngineConfig) -> None:
    """Raise ModelLoadError now if EngineCore could not find `config.model` or its tokenizer
    directory, and ConfigError if `max_model_len` exceeds the model's positions: what its start
    would fail on, found in a moment and without torch."""
    model_dir = resolve_model_dir(config.model, need_weights=config.load_format != "dummy")
    if model_dir is None and config.model not in KNOWN_NAMES:
        raise ModelLoadError(_no_dummy_config(config.model))
    if model_dir is not None and config.max_model_len is not None:
        positions = _max_positions(model_dir)
        if positions is not None and config.max_model_len > positions:
            raise ConfigError(
                "max_model_len", f"max_model_len {config.max_model_len} exceeds the model's {positions} positions"
            )
    if config.tokenizer:
        resolve_model_dir(config.tokenizer)


def _max_positions(model_dir: Path) -> int | None:
    """The model's position limit from its config.json (read as JSON: no transformers), if it names one."""
    try:
        hf_config = json.loads((model_dir / "config.json").read_text())
    except (OSError, ValueError):
        return None  # EngineCore's own loading says what is wrong with it
    positions = hf_config.get("max_position_embeddings", hf_config.get("n_positions"))
    return positions if isinstance(positions, int) else None


def _no_dummy_config(model: str | None) -> str:
    return (
        f"dummy weights for {model!r} need its config.json: it is not cached locally and is not one of the "
        f"built-in configs ({', '.join(KNOWN_NAMES)}); give a local directory with a config.json"
    )


def load_hf_config(config: EngineConfig) -> "tuple[PretrainedConfig, Path | None]":
    """The model's HF config and directory (directory None for a dummy model known only by name)."""
    from transformers import AutoConfig

    from enginetui.core.models.known_configs import known_config

    dummy = config.load_format == "dummy"
    model_dir = resolve_model_dir(config.model, need_weights=not dummy)
    if model_dir is not None:
        return AutoConfig.from_pretrained(model_dir), model_dir
    cfg = known_config(config.model)
    if cfg is None:
        raise ModelLoadError(_no_dummy_config(config.model))
    return cfg, None


def load_model(config: EngineConfig, hf_config: "PretrainedConfig", model_dir: Path | None) -> "CausalLM":
    """Build the model class for `hf_config` on the meta device, give each parameter uninitialized
    memory in the target dtype on the target device, then fill it (from disk, or random), tensor by
    tensor: no full copy of the model in another dtype ever exists."""
    import torch

    from enginetui.core.models.checkpoint import CheckpointError, iter_weights
    from enginetui.core.models.registry import model_class

    cls = model_class(hf_config)
    dtype = config.torch_dtype(getattr(hf_config, "dtype", None))
    with torch.device("meta"), _no_init():
        model = cls(hf_config)  # floating parameters in the default dtype, on meta: no memory yet
    _materialize(model, config.torch_device, dtype)
    if config.load_format == "dummy":
        _fill_dummy(model, config.seed)
    else:
        try:
            model.load_weights(iter_weights(model_dir, config.load_format))
        except CheckpointError as exc:
            raise ModelLoadError(str(exc)) from None
    return model.eval()


# torch.nn.init's functions, which layers' reset_parameters() call on their new (meta) tensors
INIT_FUNCTIONS = (
    "uniform_",
    "normal_",
    "trunc_normal_",
    "constant_",
    "ones_",
    "zeros_",
    "xavier_uniform_",
    "xavier_normal_",
    "kaiming_uniform_",
    "kaiming_normal_",
    "orthogonal_",
)


@contextmanager
def _no_init() -> Iterator[None]:
    """Skip the random initialisation of layers built on the meta device: it computes nothing there
    (every weight is loaded or filled afterwards), yet `normal_` on a meta tensor imports torch's
    compiler stack (torch._dynamo: 6-7 s of a 2-core machine's start-up) just to decompose it."""
    import torch

    saved = {name: getattr(torch.nn.init, name) for name in INIT_FUNCTIONS}
    for name in INIT_FUNCTIONS:
        setattr(torch.nn.init, name, lambda tensor, *args, **kwargs: tensor)
    try:
        yield
    finally:
        for name, function in saved.items():
            setattr(torch.nn.init, name, function)


def _materialize(model: "torch.nn.Module", device: "torch.device", dtype: "torch.dtype") -> None:
    """Replace each meta parameter by an uninitialized one on `device`, floating ones in `dtype`,
    keeping its attributes (weight loaders) and its sharing (a parameter used by two modules stays
    one). (torch's default dtype is never changed: it is the whole process's.)"""
    import torch

    done: dict[int, torch.nn.Parameter] = {}
    for module in model.modules():
        for name, param in list(module.named_parameters(recurse=False)):
            if id(param) not in done:
                # torch.empty, not empty_like: empty_like of a meta tensor goes through torch._refs, whose
                # first use imports sympy (about 3 s of a 2-core machine's start-up)
                memory = torch.empty(
                    param.shape, dtype=dtype if param.is_floating_point() else param.dtype, device=device
                )
                real = torch.nn.Parameter(memory, requires_grad=False)
                real.__dict__.update(param.__dict__)
                done[id(param)] = real
            setattr(module, name, done[id(param)])
        for name, buf in module.named_buffers(recurse=False):
            if buf is not None and buf.is_meta:
                raise TypeError(f"{type(module).__name__}.{name}: models keep no buffers (compute them on use)")


def _fill_dummy(model: "torch.nn.Module", seed: int) -> None:
    """Random weights: N(0, 0.02), norm gains 1 and norm biases 0; the same for any dtype or device."""
    import torch

    from enginetui.core.models.layers.norm import RMSNorm

    gen = torch.Generator(device="cpu").manual_seed(seed)
    norm_params = {
        id(p)
        for m in model.modules()
        if isinstance(m, (torch.nn.LayerNorm, RMSNorm))
        for p in m.parameters(recurse=False)
    }
    for name, p in model.named_parameters():
        cpu = torch.empty(p.shape, dtype=torch.float32)
        if id(p) in norm_params:
            cpu.fill_(1.0 if name.endswith("weight") else 0.0)
        else:
            cpu.normal_(0.0, 0.02, generator=gen)
        p.data.copy_(cpu)
