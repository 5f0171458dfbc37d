"""A real `enginetui serve` process on 127.0.0.1 (a free port) for the server tests.

The server runs the embedded default model (real text, a chat template) with a small KV pool,
so requests that can never fit are easy to make and a load test preempts. Stopping it sends
SIGTERM and checks that the server and its EngineCore child are both gone.
"""

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import psutil
import pytest

from tests.engine_proc.conftest import wait_gone

REPO = Path(__file__).resolve().parents[2]
API_KEY = "test-key"  # the key of the shared test server
NUM_BLOCKS = 24  # KV pool of the shared test server: 384 tokens, less than max_model_len (512)
STARTUP_TIMEOUT_S = 120.0  # the engine loads in seconds; generous for a loaded CI machine
STOP_TIMEOUT_S = 20.0  # SIGTERM to exit, open streams included
CHILD_EXIT_S = 5.0  # for its children (EngineCore, multiprocessing's resource tracker) to follow
SERVING_LINE = re.compile(r"serving '.*' on (http://\S+?)(;| \()")


class ServerProcess:
    """`python -m enginetui serve ...` as a child of the test process."""

    def __init__(self, *args: str, port_arg: bool = True, env: dict[str, str] | None = None) -> None:
        """`args` are added to `serve --host 127.0.0.1`, after `--port 0` unless port_arg is False."""
        cmd = [sys.executable, "-m", "enginetui", "serve", "--host", "127.0.0.1", *(["--port", "0"] if port_arg else []),
               "--uvicorn-log-level", "warning", *args]
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env={**os.environ, **(env or {})})
        self.lines: list[str] = []  # everything it printed
        self.url = self._wait_for_url()  # http://127.0.0.1:PORT
        self.children = [p.pid for p in psutil.Process(self.proc.pid).children(recursive=True)]  # EngineCore & co

    def _wait_for_url(self) -> str:
        found: list[str] = []
        ready = threading.Event()

        def read() -> None:
            for line in self.proc.stdout:
                self.lines.append(line)
                match = SERVING_LINE.search(line)
                if match and not found:
                    found.append(match.group(1))
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        ready.wait(STARTUP_TIMEOUT_S)
        if not found:
            self.proc.kill()
            raise RuntimeError("the server did not start:\n" + "".join(self.lines))
        return found[0]

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Signal it, wait for it to exit; returns its exit code. Raises if it or a child lingers."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError("the server did not exit after SIGTERM:\n" + "".join(self.lines)) from None
        lingering = [pid for pid in self.children if not wait_gone(pid, CHILD_EXIT_S)]
        for pid in lingering:
            psutil.Process(pid).kill()
        assert not lingering, f"processes left behind by the server: {lingering}"
        return code


@pytest.fixture(scope="session")
def server():
    """The shared test server: embedded model, 24-block pool, API key `test-key`."""
    srv = ServerProcess("--num-gpu-blocks-override", str(NUM_BLOCKS), "--max-num-seqs", "16",
                        "--api-key", API_KEY)
    yield srv
    assert srv.stop() == 0


@pytest.fixture
def http(server):
    """An httpx client on the shared server, with its key."""
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=60) as client:
        yield client


def engine_idle(http: httpx.Client, timeout: float = 10.0) -> dict:
    """Poll the engine's state until nothing runs or waits and every block is free; returns it."""
    deadline = time.monotonic() + timeout
    while True:
        state = http.get("/v1/enginetui/snapshot").json()
        if not state["running"] and not state["waiting"] and state["num_free_blocks"] == state["num_blocks"]:
            return state
        if time.monotonic() > deadline:
            raise AssertionError(f"the engine is not idle after {timeout} s: {len(state['running'])} running, "
                                 f"{len(state['waiting'])} waiting, {state['num_free_blocks']}/{state['num_blocks']} free")
        time.sleep(0.05)
