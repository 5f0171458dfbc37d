"""A real `enginetui serve` process for the server tests, and what the tests do with one: control its
engine, wait for a line it prints, wait for its engine to be idle."""

import re
import time

import httpx

from enginetui.serve.process import ServeProcess
from tests.support.checkout import REPO_ROOT

API_KEY = "test-key"  # the key of the shared test server
NUM_BLOCKS = 24  # KV pool of the shared test server: 384 tokens, less than max_model_len (512)


class ServerProcess(ServeProcess):
    """`enginetui serve` for a test, run from the repository root."""

    def __init__(self, *args: str, **kwargs) -> None:
        super().__init__(*args, cwd=REPO_ROOT, **kwargs)


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
