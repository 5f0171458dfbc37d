"""A quiet server: one access-log line per request, one line for a client that went away (from a
whole answer or a stream), and a stop (SIGINT / SIGTERM) that ends every open stream with a last
chunk (finish reason "abort", then `data: [DONE]`) and says so in one line; never a traceback."""

import json
import re
import signal
import threading
import time

import httpx
import pytest

from tests.serve.serving import ServerProcess, control, wait_for_line

WAIT_S = 60.0  # bound on every wait below
LONG = {"model": "default", "prompt": "The function", "max_tokens": 300, "ignore_eos": True}
ACCESS = re.compile(r'^INFO: +127\.0\.0\.1:\d+ - "(\S+) (\S+)(?: HTTP/1\.1)?" (\d{3}|closed)(.*) (\d+\.\d\d)s$')


@pytest.fixture
def quiet_server():
    """A server of its own (it is stopped by the test), logging at uvicorn's default level."""
    srv = ServerProcess("--num-gpu-blocks-override", "48", "--uvicorn-log-level", "info", "--allow-control")
    try:
        yield srv
    finally:
        srv.stop()


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_access_lines_a_client_that_leaves_and_a_stop_with_open_streams(quiet_server):
    srv = quiet_server
    with httpx.Client(base_url=srv.url, timeout=WAIT_S) as http:
        assert http.get("/v1/models").status_code == 200
        line = wait_for_line(srv, r'"GET /v1/models HTTP/1\.1" 200 ')
        assert ACCESS.match(line.rstrip("\n")), line
        control(http, "set_step_interval", 0.02)  # 300 tokens take 6 s: still running at the client's timeout
        wait_for_line(srv, r'"POST /v1/enginetui/control HTTP/1\.1" 200 ')

        # A client that gives up on a non-streaming completion: one line, 499, no traceback.
        before = len(srv.lines)
        with pytest.raises(httpx.ReadTimeout):
            http.post("/v1/completions", json=LONG, timeout=httpx.Timeout(WAIT_S, read=1.0))
        line = wait_for_line(srv, r'"POST /v1/completions HTTP/1\.1" 499 client closed the connection', before)
        time.sleep(0.5)  # anything it would print about it comes with or right after that line
        assert srv.lines[before:] == [line], "".join(srv.lines[before:])

        # One that leaves a stream after its first chunks: the same one line.
        before = len(srv.lines)
        with http.stream("POST", "/v1/completions", json={**LONG, "stream": True}) as r:
            next(line for line in r.iter_lines() if line.startswith("data: {"))
        line = wait_for_line(srv, r'"POST /v1/completions HTTP/1\.1" 499 client closed the connection', before)
        time.sleep(0.5)
        assert srv.lines[before:] == [line], "".join(srv.lines[before:])

        # Two open streams at SIGINT: each gets a last chunk with a finish reason, then [DONE].
        streams: list[list[str]] = [[], []]
        started = [threading.Event(), threading.Event()]  # each stream has its first chunks

        def read(lines: list[str], first_chunks: threading.Event) -> None:
            with httpx.Client(base_url=srv.url, timeout=WAIT_S) as client:
                with client.stream("POST", "/v1/completions", json={**LONG, "stream": True}) as r:
                    for text in r.iter_lines():
                        if text:
                            lines.append(text)
                        if len(lines) >= 2:
                            first_chunks.set()

        readers = [threading.Thread(target=read, args=args) for args in zip(streams, started)]
        for reader in readers:
            reader.start()
        assert all(event.wait(WAIT_S) for event in started)
        before = len(srv.lines)
        assert srv.stop(signal.SIGINT) == 0
        for reader in readers:
            reader.join(WAIT_S)
    for lines in streams:
        assert lines[-1] == "data: [DONE]", "".join(srv.lines)
        last = json.loads(lines[-2].removeprefix("data: "))
        assert last["choices"][0]["finish_reason"] == "abort"
    said = [line.rstrip("\n") for line in srv.lines[before:] if not ACCESS.match(line.rstrip("\n"))]
    assert said == ["enginetui serve: stopped (2 requests still open ended with finish reason 'abort')"], said
    everything = "".join(srv.lines)
    assert "Traceback" not in everything and "CancelledError" not in everything and "ERROR" not in everything
