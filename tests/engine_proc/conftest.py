"""Fixtures for the EngineCore-process tests: the model directory, and whether it carries a tokenizer."""

import os

import pytest


@pytest.fixture(scope="session")
def engine_model_dir(text_opt_dir) -> str:
    """A random tiny OPT (tests/conftest.py) carrying the embedded tokenizer when it exists."""
    return text_opt_dir


@pytest.fixture(scope="session")
def has_tokenizer(engine_model_dir) -> bool:
    return os.path.isfile(os.path.join(engine_model_dir, "tokenizer.json"))
