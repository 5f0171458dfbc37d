"""A real `enginetui serve` process on 127.0.0.1 (a free port) for the server tests.

The server runs the embedded default model (real text, a chat template) with a small KV pool,
so requests that can never fit are easy to make and a load test preempts; attached dashboards
(and the tests) may control its engine (--allow-control). Stopping it sends
SIGTERM and checks that the server and its EngineCore child are both gone.
"""

import httpx
import pytest

from tests.serve.serving import API_KEY, NUM_BLOCKS, ServerProcess


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
