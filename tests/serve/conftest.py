"""A real `enginetui serve` process on 127.0.0.1 (a free port) for the server tests.

The server runs the embedded default model (real text, a chat template) with a small KV pool,
so requests that can never fit are easy to make and a load test preempts; attached dashboards
(and the tests) may control its engine (--allow-control). Stopping it sends
SIGTERM and checks that the server and its EngineCore child are both gone.
"""

import re
import time
from pathlib import Path

import httpx
import pytest

from enginetui.serve.process import ServeProcess

REPO = Path(__file__).resolve().parents[2]
API_KEY = "test-key"  # the key of the shared test server
NUM_BLOCKS = 24  # KV pool of the shared test server: 384 tokens, less than max_model_len (512)


class ServerProcess(ServeProcess):
    """`enginetui serve` for a test, run from the repository root."""

    def __init__(self, *args: str, **kwargs) -> None:
        super().__init__(*args, cwd=str(REPO), **kwargs)


@pytest.fixture(scope="session")
def server():
    """The shared test server: embedded model, 24-block pool, API key `test-key`, control allowed."""
    srv = ServerProcess(
        "--num-gpu-blocks-override", str(NUM_BLOCKS), "--max-num-seqs", "16", "--api-key", API_KEY, "--allow-control"
    )
    yield srv
    assert srv.stop() == 0


@pytest.fixture
def http(server):
    """An httpx client on the shared server, with its key."""
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=60) as client:
        yield client


def control(http: httpx.Client, op: str, value=None):
    """One control call on the server's engine (POST /v1/enginetui/control); its result."""
    r = http.post("/v1/enginetui/control", json={"op": op, "value": value})
    assert r.status_code == 200, r.text
    return r.json()["result"]


def wait_for_line(server: ServeProcess, pattern: str, start: int = 0, timeout: float = 60.0) -> str:
    """The first line the server printed (from line `start` on) that matches `pattern`, waiting for it."""
    deadline = time.monotonic() + timeout
    while True:
        found = next((line for line in server.lines[start:] if re.search(pattern, line)), None)
        if found is not None:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"no line matching {pattern!r} in:\n" + "".join(server.lines[start:]))
        time.sleep(0.05)


def engine_idle(http: httpx.Client, timeout: float = 10.0) -> dict:
    """Poll the engine's state until nothing runs or waits and every block is free; returns it."""
    deadline = time.monotonic() + timeout
    while True:
        state = http.get("/v1/enginetui/snapshot").json()
        if not state["running"] and not state["waiting"] and state["num_free_blocks"] == state["num_blocks"]:
            return state
        if time.monotonic() > deadline:
            raise AssertionError(
                f"the engine is not idle after {timeout} s: {len(state['running'])} running, "
                f"{len(state['waiting'])} waiting, {state['num_free_blocks']}/{state['num_blocks']} free"
            )
        time.sleep(0.05)
