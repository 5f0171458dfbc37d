"""What the benchmarks build engines from: our engine's keyword arguments, the model's vocabulary,
and one weights directory that our engine and the Hugging Face baseline both load.
"""

import argparse
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from enginetui.flags.engine import engine_args

if TYPE_CHECKING:
    from enginetui.bench.workload import WorkloadSpec
    from enginetui.simulate.workload import SimRequest

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")  # any one will do


def bench_engine_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """LLM / AsyncLLM keyword arguments: the engine flags given, and no tokenizer when there is none
    to load or --disable-detokenize asks so (prompts are token ids; outputs are then not detokenized)."""
    kwargs = engine_args(args)
    if args.disable_detokenize or model_tokenizer_dir(kwargs) is None:
        kwargs["skip_tokenizer_init"] = True
    return kwargs


def allocate_as_the_engine_child(args: argparse.Namespace) -> None:
    """For a benchmark that runs its engine in this process: on CPU, take the EngineCore child's
    allocator settings (core/worker/cpu_tuning.py), so the steps it times cost what they cost there."""
    from enginetui.core.config import EngineConfig
    from enginetui.core.worker.cpu_tuning import tune_cpu_allocator

    if EngineConfig(**bench_engine_kwargs(args)).torch_device.type == "cpu":
        tune_cpu_allocator()


def model_tokenizer_dir(kwargs: dict[str, Any]) -> Path | None:
    """The local directory holding the model's tokenizer, or None if it has none."""
    from enginetui.core.models.loader import ModelLoadError, resolve_model_dir

    try:
        model_dir = resolve_model_dir(kwargs.get("model"), need_weights=False)
    except ModelLoadError:
        return None
    if model_dir is None or not any((model_dir / name).is_file() for name in TOKENIZER_FILES):
        return None
    return model_dir


def model_vocab_size(kwargs: dict[str, Any]) -> int:
    """The vocabulary size of the model these engine arguments name (reads its config only)."""
    from enginetui.core.config import EngineConfig
    from enginetui.core.models.loader import load_hf_config

    config = EngineConfig(**kwargs)
    return load_hf_config(config)[0].vocab_size


def bench_workload(spec: "WorkloadSpec", kwargs: dict[str, Any]) -> "list[SimRequest]":
    """The workload for the model these engine arguments name: its vocabulary, its tokenizer for
    ShareGPT prompts (the --tokenizer given, else the model's own; none: the bytes/4 rule), checked
    to fit the model's length."""
    from enginetui.bench.workload import check_fits, draw_workload
    from enginetui.core.config import EngineConfig
    from enginetui.core.models.loader import load_hf_config

    hf_config = load_hf_config(EngineConfig(**kwargs))[0]
    tokenizer = None
    if spec.dataset == "sharegpt":
        folder = kwargs.get("tokenizer") or model_tokenizer_dir(kwargs)
        tokenizer = str(folder) if folder is not None else None
    workload = draw_workload(spec, hf_config.vocab_size, tokenizer)
    check_fits(workload, kwargs.get("max_model_len") or hf_config.max_position_embeddings)
    return workload


@contextmanager
def shared_weights(kwargs: dict[str, Any]) -> Iterator[tuple[dict[str, Any], Path]]:
    """Engine arguments and a Hugging Face directory that hold the same weights, by construction.

    Real weights: the model's own directory, for both. Dummy weights: a Hugging Face model of the
    same config, initialised under the engine seed, saved to a temporary directory that our engine
    then loads like any checkpoint (load_format auto) and the baseline loads with from_pretrained.
    """
    from enginetui.core.config import EngineConfig
    from enginetui.core.models.loader import load_hf_config, resolve_model_dir

    config = EngineConfig(**kwargs)
    if config.load_format != "dummy":
        yield kwargs, resolve_model_dir(config.model)
        return
    import torch
    from transformers import AutoModelForCausalLM

    hf_config, _ = load_hf_config(config)
    with tempfile.TemporaryDirectory(prefix="enginetui-bench-weights-") as tmp:
        torch.manual_seed(config.seed)
        AutoModelForCausalLM.from_config(hf_config).eval().save_pretrained(tmp)
        shared = {**kwargs, "model": tmp, "load_format": "auto"}
        tokenizer_dir = model_tokenizer_dir(kwargs)
        if tokenizer_dir is not None and not kwargs.get("skip_tokenizer_init"):
            shared["tokenizer"] = str(tokenizer_dir)
        yield shared, Path(tmp)
