"""Shared fixtures: Hugging Face-format OPT directories with random weights, built locally."""

import os
import shutil
import tempfile
import threading
import time

# Triton picks interpreted vs compiled mode when first imported (transformers, via tests.support.models): decide now.
os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest
import torch

from tests.support.models import make_opt_dir

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Every vLLM the tests start runs eagerly: its compile at start costs minutes of g++ on 2 cores, and
# the tests check what vLLM does, not how fast (enginetui/vllm_launch.py).
os.environ.setdefault("ENGINETUI_VLLM_EAGER", "1")
torch.set_num_threads(min(2, torch.get_num_threads()))


SHARED_SCOPES = ("module", "class")  # tests sharing a fixture of these scopes stay on one xdist worker


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order and group the tests for parallel runs (`-n N --dist loadgroup`, the README's command).

    - The tests marked `slow` (minutes: vLLM starts, kernel compiles) come first, so that a worker
      does not start one when the others are nearly done.
    - The tests of a module that share a module- or class-scoped fixture (the vLLM oracle's run,
      an engine built once) form one xdist group: one worker builds that fixture once.
    - The tests of the shared `enginetui serve` process (tests/serve's session `server`) form one
      group too: one server, not one per worker.
    """
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: otherwise in file order
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        fixtures = getattr(item, "_fixtureinfo", None)
        definitions = [d for defs in (fixtures.name2fixturedefs.values() if fixtures else ()) for d in defs]
        if any(d.scope in SHARED_SCOPES for d in definitions):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
        elif "server" in item.fixturenames and item.nodeid.startswith("tests/serve/"):
            item.add_marker(pytest.mark.xdist_group("tests/serve/conftest.py::server"))


@pytest.fixture(scope="session")
def tiny_opt_dir(tmp_path_factory) -> str:
    """A 2-layer, 64-wide OPT with a 512-token vocabulary."""
    return make_opt_dir(tmp_path_factory.mktemp("tiny-opt"))


@pytest.fixture(scope="session")
def opt125m_dir(tmp_path_factory) -> str:
    """The facebook/opt-125m architecture with random weights."""
    return make_opt_dir(
        tmp_path_factory.mktemp("opt-125m"),
        vocab_size=50272,
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        ffn_dim=3072,
        max_position_embeddings=2048,
        word_embed_proj_dim=768,
    )


@pytest.fixture(scope="session")
def text_opt_dir(tmp_path_factory) -> str:
    """A random-weight tiny OPT that carries the embedded model's tokenizer (4096 tokens)."""
    from enginetui.core.models.default_model import DEFAULT_MODEL_DIR

    path = tmp_path_factory.mktemp("text-opt")
    make_opt_dir(path, seed=1, vocab_size=4096)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(DEFAULT_MODEL_DIR / name, path / name)
    return str(path)


@pytest.fixture
def ipc_dir():
    """A short new folder under the system's temporary one (an ipc:// path must fit in about 100 bytes,
    which pytest's tmp_path can exceed), removed after the test."""
    folder = tempfile.mkdtemp(prefix="ipc-")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def slow_model_thread(monkeypatch) -> None:
    """Each model step run by the async engine's model thread takes at least 50 ms. A tiny model's step
    can end before the busy loop next gets the CPU on a loaded machine, which leaves nothing to
    overlap; a long step makes the overlap the tests look for certain."""
    from enginetui.core.worker.model_runner import ModelRunner

    real_execute = ModelRunner.execute

    def slow_execute(self, out):
        if threading.current_thread() is not threading.main_thread():
            time.sleep(0.05)
        return real_execute(self, out)

    monkeypatch.setattr(ModelRunner, "execute", slow_execute)
