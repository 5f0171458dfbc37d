"""Fixtures for the EngineCore-process tests: the model directory."""

import pytest


@pytest.fixture(scope="session")
def engine_model_dir(text_opt_dir) -> str:
    """A random tiny OPT (tests/conftest.py) carrying the embedded tokenizer."""
    return text_opt_dir
