"""Fixtures and helpers for the EngineCore-process tests."""

import os

import pytest

from enginetui.serve.process import wait_gone  # noqa: F401 - the tests here import it from this module


@pytest.fixture(scope="session")
def engine_model_dir(text_opt_dir) -> str:
    """A random tiny OPT (tests/conftest.py) carrying the embedded tokenizer when it exists."""
    return text_opt_dir


@pytest.fixture(scope="session")
def has_tokenizer(engine_model_dir) -> bool:
    return os.path.isfile(os.path.join(engine_model_dir, "tokenizer.json"))


def engine_args(model_dir: str, has_tokenizer: bool, **overrides) -> dict:
    """Small, fast engine arguments for tests."""
    args = {
        "model": model_dir,
        "skip_tokenizer_init": not has_tokenizer,
        "num_gpu_blocks_override": 64,
        "block_size": 16,
        "max_num_batched_tokens": 256,
        "max_num_seqs": 8,
        "device": "cpu",
        "seed": 0,
    }
    args.update(overrides)
    return args
