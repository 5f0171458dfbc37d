"""The watcher's proxy: vLLM's API passed through byte for byte, and every request listed.

The folding of requests and responses is tested on the recorded real stream; the proxy itself in
the app (Pilot), in front of the stand-in vLLM server."""

import asyncio
import json

import httpx
import pytest

from enginetui.vllm_watch.proxy import VllmProxy
from enginetui.vllm_watch.requests import WatchedRequest, prompt_text
from enginetui.vllm_watch.requests_panel import detail_text
from tests.fakes import vllm_recorded
from tests.fakes.vllm_server import FakeVllm
from tests.support.pilot import until
from tests.vllm_watch.watch_pilot import rebuilt, shown, watch

SIZE = (150, 50)
STREAM = (vllm_recorded.FIXTURE / "completion_stream.txt").read_bytes()


def completion(**body) -> WatchedRequest:
    view = WatchedRequest("p1", 0, "127.0.0.1:5000", "POST", "/v1/completions", arrival=10.0)
    view.read_body(json.dumps({"model": "m", "prompt": "Return the", "max_tokens": 24, **body}).encode())
    return view


@pytest.mark.parametrize("piece", [1, 7, 500, len(STREAM)])
def test_a_stream_is_read_event_by_event_however_it_is_cut(piece):
    view = completion(stream=True)
    view.respond(200, 1.0)
    for i, at in enumerate(range(0, len(STREAM), piece)):
        view.read(STREAM[at : at + piece], 10.5 + 0.001 * i)
    view.end(12.0)
    assert view.text == "".join(vllm_recorded.stream_texts()) and view.status == "finished"
    assert (view.prompt, view.max_tokens, view.prompt_tokens, view.tokens()) == ("Return the", 24, 60, 24)
    assert view.finish_reason == "length" and view.token_chunks == 24
    assert view.ttft() >= 0.5 and view.finished == 12.0


def test_a_whole_json_response_and_a_refusal():
    view = completion()
    view.respond(200, 1.0)
    view.read(json.dumps(FakeVllm.whole_completion(_Stream())).encode(), 11.0)
    view.end(11.0)
    assert view.status == "finished" and view.text == "".join(vllm_recorded.stream_texts()) and view.tokens() == 24
    assert view.ttft() is None  # not streamed: the first token's time never went by
    assert "not streamed" in detail_text(view).plain
    refused = completion(max_tokens=0)
    refused.respond(400, 1.0)
    refused.read(b'{"error": {"message": "max_tokens must be at least 1"}}', 10.1)
    refused.end(10.1)
    assert refused.status == "rejected" and refused.detail == "HTTP 400: max_tokens must be at least 1"


def test_chat_requests_and_other_routes():
    chat = WatchedRequest("p2", 1, "c", "POST", "/v1/chat/completions", arrival=1.0)
    chat.read_body(json.dumps({"messages": [{"role": "user", "content": "hi"}], "stream": True}).encode())
    chat.respond(200, 1.0)
    chat.read(
        b'data: {"choices":[{"delta":{"role":"assistant"}}]}\n\ndata: {"choices":[{"delta":{"content":"Hel"}}]}\n\n'
        b'data: {"choices":[{"delta":{"content":"lo"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n',
        1.2,
    )
    chat.end(1.3)
    assert (chat.prompt, chat.text, chat.finish_reason, chat.token_chunks) == ("hi", "Hello", "stop", 2)
    assert chat.tokens() is None and chat.tokens_text() == "2 chunks"  # no usage: chunks are no token count
    assert chat.itl() == pytest.approx(0.0)  # both chunks in one read
    models = WatchedRequest("p3", 2, "c", "GET", "/v1/models", arrival=1.0, prompt="GET /v1/models")
    models.respond(200, 1.0)
    models.read(b'{"data": []}', 1.1)
    models.end(1.1)
    assert models.status == "finished" and not models.generates
    assert prompt_text({"prompt": [1, 2, 3]}) == "[1, 2, 3]" and prompt_text({"prompt": ["a", "b"]}) == "a | b"


class _Stream:
    stream = STREAM.decode()


@pytest.fixture
def fake():
    server = FakeVllm(api_key="sesame")
    yield server
    server.stop()


AUTH = {"Authorization": "Bearer sesame"}


async def test_every_request_through_the_proxy_is_passed_and_listed(fake):
    app = watch(fake, api_key="sesame", proxy=("127.0.0.1", 0))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.vllm.proxy_url is not None and app.vllm.server is not None)
        body = {"model": "opt-tiny", "prompt": "Return the", "max_tokens": 24, "stream": True}
        async with httpx.AsyncClient(timeout=10) as http:
            direct = (await http.post(f"{fake.url}/v1/completions", json=body, headers=AUTH)).content
            via = await http.post(f"{app.vllm.proxy_url}/v1/completions", json=body, headers=AUTH)
            assert via.status_code == 200 and via.content == direct == STREAM  # byte for byte
            whole = await http.post(
                f"{app.vllm.proxy_url}/v1/completions", json={**body, "stream": False}, headers=AUTH
            )
            assert whole.json()["choices"][0]["text"] == "".join(vllm_recorded.stream_texts())
            refused = await http.get(f"{app.vllm.proxy_url}/v1/models")  # no key: vLLM's 401 comes back
            assert refused.status_code == 401
            missing = await http.get(f"{app.vllm.proxy_url}/no/such/route?x=1", headers=AUTH)
            assert missing.status_code == 404
        assert fake.headers_seen["/no/such/route?x=1"]["authorization"] == "Bearer sesame"  # the key went through
        await until(pilot, lambda: len([v for v in app.vllm.requests.values() if not v.active]) == 4)
        streamed, whole_view, refused_view, missing_view = app.vllm.requests.values()
        assert streamed.status == "finished" and streamed.text == "".join(vllm_recorded.stream_texts())
        assert streamed.source.startswith("127.0.0.1:") and streamed.ttft() is not None and streamed.itl() is not None
        assert "(from the proxy's arrival)" in detail_text(streamed).plain  # not the client's, not vLLM's
        assert whole_view.status == "finished" and whole_view.tokens() == 24
        assert refused_view.status == "rejected" and "Unauthorized" in refused_view.detail
        assert missing_view.route == "/no/such/route" and missing_view.prompt == "GET /no/such/route?x=1"
        table = shown(app, "#vllm-requests")
        assert " p1 " in table and "FINISHED" in table and " 24 tok " in table and "REJECTED" in table
        assert f"proxy {app.vllm.proxy_url.removeprefix('http://')} (4 passed)" in shown(app, "#vllm-status")


async def test_a_client_that_goes_away_aborts_its_request_upstream(fake):
    app = watch(fake, api_key="sesame", proxy=("127.0.0.1", 0))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.vllm.proxy_url is not None)
        body = {"model": "opt-tiny", "prompt": "Return the", "max_tokens": 24, "stream": True}
        async with httpx.AsyncClient(timeout=10) as http:
            async with http.stream("POST", f"{app.vllm.proxy_url}/v1/completions", json=body, headers=AUTH) as r:
                async for _ in r.aiter_raw():
                    break  # the first chunk, then gone
        await until(pilot, lambda: app.vllm.requests and not next(iter(app.vllm.requests.values())).active)
        view = next(iter(app.vllm.requests.values()))
        assert view.status == "aborted" and view.tokens() < 24
        await until(pilot, lambda: fake.aborted == 1)  # the upstream stream was closed too


async def test_a_proxy_before_vllm_answers_says_so():
    app = rebuilt("http://127.0.0.1:9", kv_events=None, proxy=("127.0.0.1", 0))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.vllm.proxy_url is not None)
        async with httpx.AsyncClient(timeout=10) as http:
            r = await http.post(f"{app.vllm.proxy_url}/v1/completions", json={"prompt": "x", "stream": True})
        assert r.status_code == 502 and "did not answer" in r.json()["error"]["message"]
        await until(pilot, lambda: app.vllm.requests and not next(iter(app.vllm.requests.values())).active)
        assert next(iter(app.vllm.requests.values())).status == "error"


async def test_a_request_through_the_proxy_has_metrics_read_at_once(fake):
    """A proxied request is work that /metrics has not shown yet: the next reading comes now, not a
    whole interval later (else a short burst can start and end between two readings)."""
    app = rebuilt(fake.url, api_key="sesame", kv_events=None, poll_s=120.0, proxy=("127.0.0.1", 0))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.vllm.proxy_url is not None and app.feed.num_readings == 1)
        async with httpx.AsyncClient(timeout=10) as http:
            r = await http.post(
                f"{app.vllm.proxy_url}/v1/completions",
                headers=AUTH,
                json={"model": "opt-tiny", "prompt": "Return the", "max_tokens": 24},
            )
        assert r.status_code == 200
        await until(pilot, lambda: app.feed.num_readings == 2)  # long before the 120 s interval ends


class _Report:
    """A ProxyReport that keeps what it is told."""

    def __init__(self) -> None:
        self.told: list[tuple] = []

    def proxy_arrived(self, method, path, body, client, when) -> str:
        self.told.append(("arrived", method, path))
        return "r1"

    def proxy_responded(self, req_id, status, when) -> None:
        self.told.append(("responded", status))

    def proxy_data(self, req_id, data, when) -> None:
        self.told.append(("data", data))

    def proxy_ended(self, req_id, error, when) -> None:
        self.told.append(("ended", error))


async def _through(proxy: VllmProxy) -> list[dict]:
    """One POST through the proxy's ASGI app; what it sent back to the client."""
    sent: list[dict] = []
    messages = [{"type": "http.request", "body": b'{"prompt": "hi"}', "more_body": False}]

    async def receive():
        if messages:
            return messages.pop(0)
        await asyncio.sleep(3600)  # the client stays until the response is done

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/v1/completions", "headers": [], "client": ("127.0.0.1", 1)}
    await proxy(scope, receive, send)
    return sent


async def test_a_request_on_a_connection_vllm_closed_as_it_was_reused_is_sent_again():
    calls = []

    def upstream(request: httpx.Request) -> httpx.Response:
        calls.append(request.content)
        if len(calls) == 1:
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        return httpx.Response(200, stream=httpx.ByteStream(b"done"))

    report = _Report()
    proxy = VllmProxy("http://vllm", report)
    proxy.http = httpx.AsyncClient(base_url="http://vllm", transport=httpx.MockTransport(upstream))
    sent = await _through(proxy)
    assert calls == [b'{"prompt": "hi"}'] * 2  # the same request, once more
    assert sent[0]["status"] == 200 and b"".join(m.get("body", b"") for m in sent[1:]) == b"done"
    assert report.told == [("arrived", "POST", "/v1/completions"), ("responded", 200), ("data", b"done"), ("ended", "")]

    def closing(request: httpx.Request) -> httpx.Response:  # a server that keeps closing: one 502, said why
        raise httpx.RemoteProtocolError("Server disconnected without sending a response.")

    report = _Report()
    proxy = VllmProxy("http://vllm", report)
    proxy.http = httpx.AsyncClient(base_url="http://vllm", transport=httpx.MockTransport(closing))
    sent = await _through(proxy)
    assert sent[0]["status"] == 502 and b"did not answer: Server disconnected" in sent[1]["body"]
    assert report.told[1] == ("responded", 502) and report.told[-1][1].startswith("vLLM at http://vllm did not answer")
