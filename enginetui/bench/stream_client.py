"""A lean client for streamed HTTP answers (server-sent events), for the serving benchmarks.

The benchmark's client shares the machine with the server it measures, so every CPU second it
spends is taken from the engine, and on 2 cores at a barrier of the model's threads, where a
stolen moment stalls both (core/engine/wake_queue.py). httpx parses each chunk in pure Python
(h11): 1.6-2.0 CPU seconds over a pass of 64 ShareGPT conversations all at once (14,176 chunks),
as much as the whole front-end of the server it measured; asyncio's StreamReader, awaited for a
chunk's size line, its bytes, then handed through an async generator, still took 0.6 s (42 us a
chunk). This is an asyncio Protocol instead: the bytes are parsed in the callback that receives
them and each event's data goes straight to the caller's callback, with no task woken per chunk
(`vllm bench serve` uses aiohttp's C parser, for the same reason).

Plain http:// (the benchmarks target 127.0.0.1), one connection per request, HTTP/1.1 with a
chunked or sized body; events separated by a blank line, as the OpenAI-compatible servers send them.
"""

import asyncio
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

_HEAD_END = b"\r\n\r\n"  # ends the answer's status line and headers


async def stream_events(
    base_url: str,
    path: str,
    payload: dict[str, Any],
    on_data: Callable[[bytes], None],
    headers: dict[str, str] | None = None,
) -> None:
    """POST `payload` as JSON to base_url + path; call `on_data` with the data of every event of the
    streamed answer as it arrives; return when the answer has ended. Raises RuntimeError, with the
    answer's body, when the status is not 200 (and whatever `on_data` raises)."""
    url = urlsplit(base_url)
    if url.scheme != "http":
        raise ValueError(f"the benchmark's streaming client speaks plain http:// only, not {base_url!r}")
    if url.hostname is None:
        raise ValueError(f"no host in {base_url!r}")
    loop = asyncio.get_running_loop()
    ended = loop.create_future()
    transport, _ = await loop.create_connection(lambda: _EventStream(on_data, ended), url.hostname, url.port or 80)
    try:
        body = json.dumps(payload).encode()
        head = [
            f"POST {url.path.rstrip('/')}{path} HTTP/1.1",
            f"Host: {url.netloc}",
            "Content-Type: application/json",
            f"Content-Length: {len(body)}",
            "Accept: text/event-stream",
            "Connection: close",
            *(f"{k}: {v}" for k, v in (headers or {}).items()),
        ]
        transport.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
        await ended
    finally:
        transport.close()


class _EventStream(asyncio.Protocol):
    """Parses one answer as its bytes arrive: the head, then the body (chunked, sized or up to the
    close), then the events in it."""

    def __init__(self, on_data: Callable[[bytes], None], ended: asyncio.Future) -> None:
        self.on_data = on_data  # called with each event's data
        self.ended = ended  # set (None or the exception) when the answer is over
        self.buffer = b""  # bytes received and not parsed yet
        self.status = 0  # the answer's HTTP status (0 until its head has arrived)
        self.chunked = False  # the body comes in chunks (transfer-encoding: chunked)
        self.remaining = -1  # a sized body's bytes still to come (-1: not sized)
        self.pending = b""  # the start of an event whose blank line has not arrived yet
        self.body: list[bytes] = []  # the body of an answer that is not 200, for the error

    def data_received(self, data: bytes) -> None:
        if self.ended.done():
            return
        self.buffer += data
        try:
            if not self.status and not self._read_head():
                return
            self._read_body()
        except Exception as exc:  # noqa: BLE001 - a malformed answer or the caller's callback: the awaiter raises it
            self._end(exc)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.ended.done():
            return
        if not self.status:
            self._end(RuntimeError("the server closed the connection without an answer"))
        elif self.chunked or self.remaining > 0:
            self._end(RuntimeError("the server closed the connection before the answer's end"))
        else:  # a body that runs up to the close
            self._body_piece(self.buffer)
            self._finish()

    def _read_head(self) -> bool:
        """Parse the status line and headers once they are all in; whether they were."""
        end = self.buffer.find(_HEAD_END)
        if end < 0:
            return False
        status_line, *lines = self.buffer[:end].decode("latin-1").split("\r\n")
        self.buffer = self.buffer[end + len(_HEAD_END) :]
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        self.status = int(status_line.split()[1])
        self.chunked = headers.get("transfer-encoding", "").lower() == "chunked"
        if not self.chunked and "content-length" in headers:
            self.remaining = int(headers["content-length"])
        return True

    def _read_body(self) -> None:
        if self.chunked:
            self._read_chunks()
        elif self.remaining >= 0:
            piece, self.buffer = self.buffer[: self.remaining], self.buffer[self.remaining :]
            self.remaining -= len(piece)
            self._body_piece(piece)
            if self.remaining == 0:
                self._finish()

    def _read_chunks(self) -> None:
        """Every whole chunk in the buffer; the last (size 0) ends the answer (trailers are not read)."""
        buffer, start = self.buffer, 0
        while True:
            line_end = buffer.find(b"\r\n", start)
            if line_end < 0:
                break
            size = int(buffer[start:line_end].split(b";")[0], 16)
            if size == 0:
                self._finish()
                return
            data_start = line_end + 2
            if len(buffer) < data_start + size + 2:  # the chunk and its CRLF are not all in yet
                break
            self._body_piece(buffer[data_start : data_start + size])
            start = data_start + size + 2
        self.buffer = buffer[start:]

    def _body_piece(self, piece: bytes) -> None:
        if self.status != 200:
            self.body.append(piece)
            return
        self.pending += piece
        *events, self.pending = self.pending.split(b"\n\n")
        for event in events:
            for line in event.split(b"\n"):
                if line.startswith(b"data: "):
                    self.on_data(line[6:])

    def _finish(self) -> None:
        if self.status != 200:
            text = b"".join(self.body).decode("utf-8", "replace")
            self._end(RuntimeError(f"the server answered {self.status}: {text}"))
        else:
            self._end(None)

    def _end(self, exc: Exception | None) -> None:
        if self.ended.done():
            return
        if exc is None:
            self.ended.set_result(None)
        else:
            self.ended.set_exception(exc)
