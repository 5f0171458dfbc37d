"""A lean client for streamed HTTP answers (server-sent events), for the serving benchmarks.

The benchmark's client shares the machine with the server it measures, so every CPU second it
spends is taken from the engine, and on 2 cores at a barrier of the model's threads, where a
stolen moment stalls both (core/engine/wake_queue.py). httpx parses each chunk in pure Python
(h11): 1.6-2.0 CPU seconds over a pass of 64 ShareGPT conversations all at once (14,176 chunks),
as much as the whole front-end of the server it measured. This reads the raw stream with asyncio
instead (`vllm bench serve` uses aiohttp's C parser, for the same reason).

Plain http:// (the benchmarks target 127.0.0.1), one connection per request, HTTP/1.1 with a
chunked or sized body; events separated by a blank line, as the OpenAI-compatible servers send them.
"""

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit


async def stream_events(base_url: str, path: str, payload: dict[str, Any],
                        headers: dict[str, str] | None = None) -> AsyncIterator[bytes]:
    """POST `payload` as JSON to base_url + path; yield the data of every event of the streamed answer.
    Raises RuntimeError, with the answer's body, when the status is not 200."""
    url = urlsplit(base_url)
    if url.scheme != "http":
        raise ValueError(f"the benchmark's streaming client speaks plain http:// only, not {base_url!r}")
    reader, writer = await asyncio.open_connection(url.hostname, url.port or 80)
    try:
        body = json.dumps(payload).encode()
        head = [f"POST {url.path.rstrip('/')}{path} HTTP/1.1", f"Host: {url.netloc}",
                "Content-Type: application/json", f"Content-Length: {len(body)}", "Accept: text/event-stream",
                "Connection: close", *(f"{k}: {v}" for k, v in (headers or {}).items())]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
        status, answer_headers = await _read_head(reader)
        chunks = _body_chunks(reader, answer_headers)
        if status != 200:
            text = b"".join([c async for c in chunks]).decode("utf-8", "replace")
            raise RuntimeError(f"the server answered {status}: {text}")
        pending = b""  # the start of an event whose blank line has not arrived yet
        async for chunk in chunks:
            pending += chunk
            *events, pending = pending.split(b"\n\n")
            for event in events:
                for line in event.split(b"\n"):
                    if line.startswith(b"data: "):
                        yield line[6:]
    finally:
        writer.close()


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    """The status code and the headers (names in lower case) of an HTTP/1.1 answer."""
    status_line = await reader.readline()
    if not status_line:
        raise RuntimeError("the server closed the connection without an answer")
    headers = {}
    while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers


async def _body_chunks(reader: asyncio.StreamReader, headers: dict[str, str]) -> AsyncIterator[bytes]:
    """The answer's body as it arrives: chunk by chunk (chunked transfer encoding), or whole."""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        while size := int((await reader.readline()).split(b";")[0], 16):
            yield (await reader.readexactly(size + 2))[:-2]  # the chunk and its CRLF
        while (await reader.readline()) not in (b"\r\n", b"\n", b""):  # trailers
            pass
    elif "content-length" in headers:
        yield await reader.readexactly(int(headers["content-length"]))
    else:
        yield await reader.read()  # until the server closes
