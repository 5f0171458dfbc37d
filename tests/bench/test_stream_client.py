"""The serving benchmarks' streaming client against a scripted HTTP/1.1 server on 127.0.0.1."""

import asyncio
import json

import pytest

from enginetui.bench.stream_client import stream_events


async def _serve_once(answer: bytes) -> tuple[asyncio.AbstractServer, str, list[bytes]]:
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

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", seen


def _chunked(*pieces: bytes) -> bytes:
    return b"|".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"|0\r\n\r\n"


async def test_events_split_across_chunks_come_out_whole_and_in_order():
    events = [{"choices": [{"token_ids": [i]}]} for i in range(3)]
    stream = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
    cuts = [stream[:7], stream[7:40], stream[40:41], stream[41:]]  # mid-line, mid-event, one byte
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    server, url, seen = await _serve_once(head + b"|" + _chunked(*cuts))
    async with server:
        got = []
        await stream_events(url, "/v1/completions", {"prompt": [1, 2]}, got.append, {"Authorization": "Bearer k"})
    assert got == [json.dumps(e).encode() for e in events] + [b"[DONE]"]
    request = seen[0]
    assert request.startswith(b"POST /v1/completions HTTP/1.1\r\n") and b"Authorization: Bearer k\r\n" in request
    assert json.loads(request.split(b"\r\n\r\n", 1)[1]) == {"prompt": [1, 2]}


async def test_an_error_status_raises_with_the_body():
    body = b'{"error": {"message": "no such model"}}'
    answer = b"HTTP/1.1 404 Not Found\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
    server, url, _ = await _serve_once(answer)
    async with server:
        with pytest.raises(RuntimeError, match="answered 404: .*no such model"):
            await stream_events(url, "/v1/completions", {}, [].append)


async def test_only_plain_http_is_spoken():
    with pytest.raises(ValueError, match="plain http"):
        await stream_events("https://127.0.0.1:1", "/v1/completions", {}, [].append)


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
    for head in (b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(stream), b"HTTP/1.1 200 OK\r\n\r\n"):
        server, url, _ = await _serve_once(head + b"|" + stream[:12] + b"|" + stream[12:])
        async with server:
            got = []
            await stream_events(url, "/v1/completions", {}, got.append)
        assert got == [b"{}", b"[DONE]"]


async def test_a_connection_closed_inside_the_body_raises():
    head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
    server, url, _ = await _serve_once(head + b"|" + b"a\r\ndata: {}\n\n\r\n")
    async with server:
        with pytest.raises(RuntimeError, match="before the answer's end"):
            await stream_events(url, "/v1/completions", {}, [].append)


async def test_what_the_callback_raises_is_raised():
    stream = b"data: {}\n\n"
    server, url, _ = await _serve_once(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(stream), stream))

    def refuse(data: bytes) -> None:
        raise ValueError(f"cannot read {data!r}")

    async with server:
        with pytest.raises(ValueError, match="cannot read"):
            await stream_events(url, "/v1/completions", {}, refuse)
