"""Fixtures for the benchmark tests: the wait for a quiet machine made instant, the stand-in vLLM, and
the allocator tuning recorded instead of done."""

import sys

import pytest

from enginetui.bench import competing, quiet
from enginetui.core.worker import cpu_tuning
from enginetui.vllm_launch import VLLM_PYTHON_ENV
from tests.support.vllm_marks import FAKE_VLLM


@pytest.fixture(autouse=True)
def quiet_waits(monkeypatch) -> list[bool]:
    """Every timed pass still runs the wait for a quiet machine (enginetui.bench.quiet), on a sampler
    that finds the machine quiet at once: the tests check counts, not speed, and on a machine busy
    with other tests (or with the pass before) each wait would cost up to quiet.TIMEOUT_S. What the
    wait itself does is tested on a fake machine in test_quiet.py. The list holds each wait's result."""
    waits: list[bool] = []

    def wait_on_a_quiet_machine() -> bool:
        waits.append(quiet.wait_until_quiet(sample=lambda seconds: 0.0))
        return waits[-1]

    monkeypatch.setattr(competing, "wait_until_quiet", wait_on_a_quiet_machine)
    return waits


@pytest.fixture
def fake_vllm(monkeypatch) -> str:
    """This interpreter, seeing the stand-in vLLM package: the runner's interpreter for these tests."""
    monkeypatch.setenv("PYTHONPATH", str(FAKE_VLLM))
    monkeypatch.setenv(VLLM_PYTHON_ENV, sys.executable)
    return sys.executable


@pytest.fixture(autouse=True)
def allocator_tunings(monkeypatch) -> list[bool]:
    """Record the allocator tuning of the benchmarks that run their engine in this process (profile, ops)
    instead of changing the test process's allocator."""
    calls: list[bool] = []
    monkeypatch.setattr(cpu_tuning, "tune_cpu_allocator", lambda: calls.append(True) or True)
    return calls
