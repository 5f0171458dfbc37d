"""A client that goes away aborts its request in the engine at once: its blocks are freed and
the step events (what a dashboard shows) report the abort."""

import contextlib
import json
import time

import httpx
import pytest
from websockets.sync.client import connect

from enginetui.core.engine.events import RequestEnd, decode_event
from tests.serve.serving import API_KEY, control, engine_idle

LONG = {"model": "default", "prompt": "The function", "max_tokens": 300, "ignore_eos": True}
WAIT_S = 30.0  # bound on every wait below (a loaded CI machine is slow, never this slow)


@contextlib.contextmanager
def events(server):
    """The engine's step events, subscribed before the test acts (a dashboard's view)."""
    url = server.url.replace("http://", "ws://") + "/v1/enginetui/events"
    with connect(url, additional_headers={"Authorization": f"Bearer {API_KEY}"}, open_timeout=WAIT_S) as ws:
        assert decode_event(ws.recv(timeout=WAIT_S)).is_snapshot
        yield ws


def ended(ws, req_id: str) -> RequestEnd:
    """Read step events until `req_id` ends; returns how it ended."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        event = decode_event(ws.recv(timeout=max(0.01, deadline - time.monotonic())))
        for end in (*event.finished, *event.rejected):
            if end.req_id == req_id:
                return end
    raise AssertionError(f"{req_id} did not end within {WAIT_S} s")


def test_closing_a_stream_aborts_the_request(server, http):
    headers = {"Authorization": f"Bearer {API_KEY}", "X-Request-Id": "gone-1"}
    with events(server) as ws, httpx.Client(base_url=server.url, headers=headers, timeout=WAIT_S) as client:
        with client.stream("POST", "/v1/completions", json={**LONG, "stream": True}) as r:
            chunks = []
            for line in r.iter_lines():
                if line.startswith("data: {"):
                    chunks.append(json.loads(line[6:]))
                if len(chunks) == 3:
                    break  # leaving the block closes the connection mid-stream
        assert all(c["choices"][0]["finish_reason"] is None for c in chunks)
        end = ended(ws, "cmpl-gone-1")
    assert end.reason == "abort" and end.num_output_tokens < LONG["max_tokens"]
    engine_idle(http)  # nothing listed, every block free


def test_a_client_that_times_out_aborts_its_whole_request(server, http):
    headers = {"Authorization": f"Bearer {API_KEY}", "X-Request-Id": "gone-2"}
    # Slow motion (20 ms a step: 300 tokens take 6 s), so the request is still running at the timeout.
    control(http, "set_step_interval", 0.02)
    try:
        with events(server) as ws, httpx.Client(base_url=server.url, headers=headers) as client:
            with pytest.raises(httpx.ReadTimeout):
                client.post("/v1/completions", json=LONG, timeout=httpx.Timeout(WAIT_S, read=1.0))
            client.close()
            assert ended(ws, "cmpl-gone-2").reason == "abort"
    finally:
        control(http, "set_step_interval", 0)
    engine_idle(http)


def test_disconnect_while_the_engine_is_paused_aborts_the_waiting_request(server, http):
    control(http, "pause")
    try:
        client = httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {API_KEY}", "X-Request-Id": "gone-3"}
        )
        with pytest.raises(httpx.ReadTimeout):  # no answer while paused: it waits for its first token
            client.post("/v1/completions", json={**LONG, "stream": True}, timeout=httpx.Timeout(WAIT_S, read=1.0))
        client.close()
        deadline = time.monotonic() + WAIT_S
        while any(p["req_id"] == "cmpl-gone-3" for p in http.get("/v1/enginetui/snapshot").json()["waiting"]):
            assert time.monotonic() < deadline, "the abandoned request is still waiting"
            time.sleep(0.05)
    finally:
        control(http, "resume")
    engine_idle(http)
