"""The one OpenAI streaming client (enginetui/openai_client.py) against scripted HTTP/1.1 servers on 127.0.0.1,
and its event reader on bytes cut anywhere."""

import asyncio
import json
import shutil
import ssl
import subprocess
from contextlib import aclosing

import pytest

from enginetui.openai_client import (
    DONE,
    EventError,
    HTTPStatusError,
    InvalidRequest,
    SseReader,
    StreamError,
    auth_headers,
    choice_text,
    error_message,
    stream_chunks,
    stream_events,
    usage_tokens,
)

OK_CHUNKED = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


async def _serve_once(
    answer: bytes, tls: ssl.SSLContext | None = None
) -> tuple[asyncio.AbstractServer, str, list[bytes]]:
    """A server that reads one request (head and sized body) and writes `answer`; the requests it read."""
    seen: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(
            next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
        )
        seen.append(head + await reader.readexactly(length))
        for part in answer.split(b"|"):  # "|" marks where the answer is cut between writes
            writer.write(part)
            await writer.drain()
            await asyncio.sleep(0.01)
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=tls)
    scheme = "https" if tls else "http"
    return server, f"{scheme}://127.0.0.1:{server.sockets[0].getsockname()[1]}", seen


def _chunked(*pieces: bytes) -> bytes:
    return b"|".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"|0\r\n\r\n"


def _events(*chunks: dict) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


def _sized(status: str, body: bytes) -> bytes:
    return b"HTTP/1.1 %s\r\ncontent-length: %d\r\n\r\n%s" % (status.encode(), len(body), body)


# ---- the event reader ------------------------------------------------------------------------


def test_events_cut_at_every_byte_come_out_whole():
    stream = _events({"n": 1}, {"n": 2})
    reader, got = SseReader(), []
    for i in range(len(stream)):
        got += reader.feed(stream[i : i + 1])
    assert got == [b'{"n": 1}', b'{"n": 2}', DONE] and reader.pending == b""


def test_crlf_line_ends_cut_between_cr_and_lf_and_bare_cr():
    for stream in (b'data: {"a": 1}\r\n\r\ndata: [DONE]\r\n\r\n', b'data: {"a": 1}\r\rdata: [DONE]\r\r'):
        for cut in range(1, len(stream)):
            reader = SseReader()
            assert reader.feed(stream[:cut]) + reader.feed(stream[cut:]) == [b'{"a": 1}', DONE], (stream, cut)


def test_data_lines_join_and_comments_and_other_fields_are_skipped():
    stream = b": keep-alive\n\nevent: chunk\nid: 7\ndata:first\ndata: second\n\nretry: 10\n\ndata: last\n\n"
    assert SseReader().feed(stream) == [b"first\nsecond", b"last"]


# ---- the transport -----------------------------------------------------------------------------


async def test_events_split_across_chunks_come_out_whole_and_in_order_with_the_key_sent():
    events = [{"choices": [{"token_ids": [i]}]} for i in range(3)]
    stream = _events(*events)
    cuts = [stream[:7], stream[7:40], stream[40:41], stream[41:]]  # mid-line, mid-event, one byte
    server, url, seen = await _serve_once(OK_CHUNKED + b"|" + _chunked(*cuts))
    async with server:
        got = []
        await stream_events(url, "/v1/completions", {"prompt": [1, 2]}, got.append, auth_headers("k"))
    assert got == [json.dumps(e).encode() for e in events] + [DONE]
    request = seen[0]
    assert request.startswith(b"POST /v1/completions HTTP/1.1\r\n") and b"Authorization: Bearer k\r\n" in request
    assert json.loads(request.split(b"\r\n\r\n", 1)[1]) == {"prompt": [1, 2]}


async def test_no_key_sends_no_authorization_header():
    assert auth_headers(None) == auth_headers("") == {}
    server, url, seen = await _serve_once(_sized("200 OK", _events()))
    async with server:
        await stream_events(url, "/v1/completions", {}, [].append, auth_headers(None))
    assert b"authorization" not in seen[0].lower()


async def test_an_invalid_request_raises_a_value_error_with_the_body_message():
    server, url, _ = await _serve_once(_sized("404 Not Found", b'{"error": {"message": "no such model"}}'))
    async with server:
        with pytest.raises(InvalidRequest, match=r"^HTTP 404: no such model$") as caught:
            await stream_events(url, "/v1/completions", {}, [].append)
    assert isinstance(caught.value, ValueError) and caught.value.status == 404


async def test_a_server_error_status_raises_with_the_body_text_and_is_no_value_error():
    server, url, _ = await _serve_once(_sized("503 Service Unavailable", b"engine is gone\n"))
    async with server:
        with pytest.raises(HTTPStatusError, match=r"^HTTP 503: engine is gone$") as caught:
            await stream_events(url, "/v1/completions", {}, [].append)
    assert not isinstance(caught.value, ValueError) and caught.value.body == b"engine is gone\n"


def test_error_bodies_say_their_message():
    assert error_message(b'{"error": {"message": "m", "type": "BadRequestError"}}') == "m"
    assert error_message(b'{"object": "error", "message": "vllm says"}') == "vllm says"
    assert error_message(b'{"detail": "Not Found"}') == "Not Found"
    assert error_message(b'{"error": "Unauthorized"}') == "Unauthorized"
    assert error_message(b"<html>bad gateway</html>") == "<html>bad gateway</html>"
    assert error_message(b"") == "no message"


async def test_only_http_and_https_are_spoken():
    with pytest.raises(ValueError, match="http:// and https:// only"):
        await stream_events("ftp://127.0.0.1:1", "/v1/completions", {}, [].append)


async def test_nobody_listening_is_a_stream_error():
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    with pytest.raises(StreamError, match=f"cannot reach http://127.0.0.1:{port}: nothing listens there"):
        await stream_events(f"http://127.0.0.1:{port}", "/v1/completions", {}, [].append)


async def test_chunk_framing_split_anywhere_or_merged_is_read_whole():
    events = [b'{"n": %d}' % i for i in range(4)]
    body = b"".join(b"%x\r\n%s\r\n" % (len(b"data: " + e + b"\n\n"), b"data: " + e + b"\n\n") for e in events)
    body += b"0\r\n\r\n"
    head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
    # cut inside the head, inside a size line, between a chunk's data and its CRLF; two chunks in one write
    whole = head + body
    cuts = [5, len(head) + 1, len(head) + 4 + len(events[0]) + 8, len(whole) - 3]
    answer = b"|".join(whole[a:b] for a, b in zip([0, *cuts], [*cuts, len(whole)]))
    server, url, _ = await _serve_once(answer)
    async with server:
        got = []
        await stream_events(url, "/v1/completions", {}, got.append)
    assert got == events


async def test_a_sized_body_and_a_body_up_to_the_close_are_read():
    stream = b"data: {}\n\ndata: [DONE]\n\n"
    for head in (b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(stream), b"HTTP/1.0 200 OK\r\n\r\n"):
        server, url, _ = await _serve_once(head + b"|" + stream[:12] + b"|" + stream[12:])
        async with server:
            got = []
            await stream_events(url, "/v1/completions", {}, got.append)
        assert got == [b"{}", DONE]


async def test_a_body_up_to_the_close_streams_before_the_close():
    first_read = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.0 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: {}\n\n")
        await writer.drain()
        await first_read.wait()  # the client has the first event while the answer is still open
        writer.write(b"data: [DONE]\n\n")
        writer.close()

    def on_data(data: bytes) -> None:
        got.append(data)
        first_read.set()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    got: list[bytes] = []
    async with server:
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        await asyncio.wait_for(stream_events(url, "/v1/completions", {}, on_data), 10)
    assert got == [b"{}", DONE]


async def test_a_connection_closed_inside_the_body_raises():
    server, url, _ = await _serve_once(OK_CHUNKED + b"|" + b"a\r\ndata: {}\n\n\r\n")
    async with server:
        with pytest.raises(StreamError, match="before the answer's end"):
            await stream_events(url, "/v1/completions", {}, [].append)


async def test_what_the_callback_raises_is_raised():
    server, url, _ = await _serve_once(_sized("200 OK", b"data: {}\n\n"))

    def refuse(data: bytes) -> None:
        raise KeyError(f"cannot read {data!r}")

    async with server:
        with pytest.raises(KeyError, match="cannot read"):
            await stream_events(url, "/v1/completions", {}, refuse)


# ---- JSON chunks -------------------------------------------------------------------------------


async def test_chunks_up_to_done_with_usage_on_each_and_on_the_last():
    """vLLM's continuous usage stats: usage on every chunk, and a last chunk with usage and no choices."""
    chunks = [
        {"choices": [{"text": "Hel", "finish_reason": None}], "usage": {"prompt_tokens": 5, "completion_tokens": 1}},
        {"choices": [{"text": "lo", "finish_reason": "length"}], "usage": {"prompt_tokens": 5, "completion_tokens": 2}},
        {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}},
    ]
    server, url, _ = await _serve_once(OK_CHUNKED + b"|" + _chunked(_events(*chunks)))
    async with server:
        got = [c async for c in stream_chunks(url, "/v1/completions", {})]
    assert got == chunks
    assert [usage_tokens(c) for c in got] == [(5, 1), (5, 2), (5, 2)]
    assert usage_tokens({"choices": []}) == (None, None)
    assert "".join(choice_text(ch) for c in got for ch in c["choices"]) == "Hello"


def test_choice_text_of_completions_and_chats():
    assert choice_text({"text": "a"}) == "a" and choice_text({"text": None}) == ""
    assert choice_text({"delta": {"content": "b"}}) == "b" and choice_text({"delta": {"role": "assistant"}}) == ""
    assert choice_text({"message": {"content": "c"}}) == "c"


async def test_an_error_event_raises_its_message():
    stream = _events({"choices": [{"text": "a"}]}, {"error": {"message": "the engine died", "code": 500}})
    server, url, _ = await _serve_once(OK_CHUNKED + b"|" + _chunked(stream))
    async with server:
        got = []
        with pytest.raises(EventError, match="^the engine died$"):
            async for chunk in stream_chunks(url, "/v1/completions", {}):
                got.append(chunk)
    assert got == [{"choices": [{"text": "a"}]}]


async def test_an_event_that_is_not_json_is_a_stream_error():
    server, url, _ = await _serve_once(_sized("200 OK", b"data: {oops\n\n"))
    async with server:
        with pytest.raises(StreamError, match="not JSON"):
            [c async for c in stream_chunks(url, "/v1/completions", {})]


async def test_leaving_the_chunks_early_closes_the_connection():
    """The server sees the client go (vLLM then aborts the request)."""
    gone = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n" + _events({"n": 0})[:-14])
        await writer.drain()
        await reader.read()  # the request's body, then EOF when the client closes
        gone.set()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    async with server:
        async with aclosing(stream_chunks(url, "/v1/completions", {})) as chunks:
            async for chunk in chunks:
                assert chunk == {"n": 0}
                break
        await asyncio.wait_for(gone.wait(), 10)


async def test_https(tmp_path, monkeypatch):
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("no openssl command to make a certificate with")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        + ["-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1"]
        + ["-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
    )
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the client trusts it as it trusts the system's
    server, url, _ = await _serve_once(_sized("200 OK", _events({"n": 1})), tls)
    async with server:
        assert url.startswith("https://")
        assert [c async for c in stream_chunks(url, "/v1/completions", {})] == [{"n": 1}]
