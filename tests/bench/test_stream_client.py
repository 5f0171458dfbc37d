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
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
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
        got = [d async for d in stream_events(url, "/v1/completions", {"prompt": [1, 2]}, {"Authorization": "Bearer k"})]
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
            [d async for d in stream_events(url, "/v1/completions", {})]


async def test_only_plain_http_is_spoken():
    with pytest.raises(ValueError, match="plain http"):
        [d async for d in stream_events("https://127.0.0.1:1", "/v1/completions", {})]
