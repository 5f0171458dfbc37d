"""The fake vLLM server playing the recorded session, for the vLLM dashboard's tests."""

import pytest

from tests.fakes.vllm_server import FakeVllm


@pytest.fixture
def fake():
    """The recorded session's server (tests/fakes/vllm_server.py), stopped after the test."""
    server = FakeVllm()
    yield server
    server.stop()
