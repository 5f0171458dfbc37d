"""The one client of OpenAI-compatible streaming APIs (vLLM's server, `enginetui serve`), and the one
reader of their server-sent events (SseReader: the watcher's proxy reads the events it passes on with it).

The serving benchmarks run this client on the machine of the server they measure, where every CPU
second it spends is taken from the engine; httpx parses each chunk in pure Python (h11), as costly
as the server's whole front-end. So this is an asyncio Protocol: the bytes are parsed in the
callback that receives them and each event's data goes straight to the caller's callback, with no
task woken per chunk (`vllm bench serve` uses aiohttp's C parser for the same reason).

One connection per request, HTTP/1.1 (http:// or https://), a chunked, sized or up-to-the-close body.
"""

import asyncio
import json
import ssl
from collections.abc import AsyncGenerator, Callable
from typing import Any
from urllib.parse import urlsplit

DONE = b"[DONE]"  # the data of the event that ends an OpenAI stream
CONNECT_TIMEOUT_S = 10.0  # to reach the server; an answer may take as long as it takes
USAGE_EVERY_CHUNK = {"include_usage": True, "continuous_usage_stats": True}  # stream_options: usage on each chunk
INVALID_REQUEST = (400, 404, 422)  # statuses of a request refused as invalid (bad field, unknown model)
_HEAD_END = b"\r\n\r\n"  # ends the answer's status line and headers


class StreamError(RuntimeError):
    """The stream could not be had or broke: the server unreachable, an error status or error event."""


class HTTPStatusError(StreamError):
    """The server answered with a status other than 200."""

    def __init__(self, status: int, body: bytes) -> None:
        self.status = status
        self.body = body
        self.message = error_message(body)  # the body's error message
        super().__init__(f"HTTP {status}: {self.message}")


class InvalidRequest(HTTPStatusError, ValueError):
    """The server refused the request as invalid (INVALID_REQUEST): a ValueError, as an engine raises."""


class EventError(StreamError):
    """The stream carried an error event (`data: {"error": ...}`) instead of its next chunk."""


def auth_headers(api_key: str | None) -> dict[str, str]:
    """The header that carries an API key (none without one)."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def error_message(body: bytes | str) -> str:
    """The message of an OpenAI / vLLM / FastAPI error body; its text when it is not JSON."""
    try:
        data = json.loads(body)
    except ValueError:
        text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
        return text.strip()[:200] or "no message"
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and "message" in error:
            return str(error["message"])
        for key in ("message", "detail", "error"):
            if key in data:
                return str(data[key])
    return str(data)[:200]


def choice_text(choice: dict) -> str:
    """The text of one choice: a completion's `text`, a chat chunk's `delta.content`, a chat
    response's `message.content`."""
    if "text" in choice:
        return choice.get("text") or ""
    part = choice.get("delta") or choice.get("message") or {}
    return (part.get("content") or "") if isinstance(part, dict) else ""


def usage_tokens(chunk: dict) -> tuple[int | None, int | None]:
    """(prompt tokens, completion tokens) of a chunk's or a response's `usage`; None where it has none."""
    usage = chunk.get("usage")
    if not isinstance(usage, dict):
        return None, None
    return usage.get("prompt_tokens"), usage.get("completion_tokens")


class SseReader:
    """Server-sent events read as their bytes arrive, cut anywhere: the data of each whole event (its
    `data:` lines joined by newlines; other fields and comments skipped; LF, CRLF or CR line ends)."""

    __slots__ = ("pending", "after_cr")

    def __init__(self) -> None:
        self.pending = b""  # the start of an event whose blank line has not arrived yet
        self.after_cr = False  # the last bytes fed ended with CR: a LF next is the rest of that line end

    def feed(self, data: bytes) -> list[bytes]:
        """The data of every event that `data` completes, in order."""
        if self.after_cr and data:
            self.after_cr = False
            if data.startswith(b"\n"):
                data = data[1:]
        text = self.pending + data
        if b"\r" in text:
            self.after_cr = text.endswith(b"\r")
            text = text.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        *events, self.pending = text.split(b"\n\n")
        found = []
        for event in events:
            if event.startswith(b"data: ") and b"\n" not in event:  # one line: as the servers send them
                found.append(event[6:])
                continue
            lines = [line[5:].removeprefix(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
            if lines:
                found.append(lines[0] if len(lines) == 1 else b"\n".join(lines))
        return found


async def stream_events(
    base_url: str,
    path: str,
    payload: dict[str, Any],
    on_data: Callable[[bytes], None],
    headers: dict[str, str] | None = None,
    connect_timeout_s: float = CONNECT_TIMEOUT_S,
) -> None:
    """POST `payload` as JSON to base_url + path; call `on_data` with the data of every event of the
    streamed answer as it arrives ([DONE] included); return when the answer has ended. Raises
    StreamError (InvalidRequest, a ValueError too, for INVALID_REQUEST; HTTPStatusError for another
    status) and whatever `on_data` raises."""
    transport, ended = await _open(base_url, path, payload, on_data, headers, connect_timeout_s)
    try:
        await ended
    finally:
        transport.close()


async def stream_chunks(
    base_url: str,
    path: str,
    payload: dict[str, Any],
    headers: dict[str, str] | None = None,
    connect_timeout_s: float = CONNECT_TIMEOUT_S,
) -> AsyncGenerator[dict, None]:
    """The JSON chunks of a streamed answer (as stream_events, up to [DONE]); an error event raises
    EventError. Leaving the loop early closes the connection (the server aborts the request)."""
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()
    transport, ended = await _open(base_url, path, payload, queue.put_nowait, headers, connect_timeout_s)
    ended.add_done_callback(lambda _: queue.put_nowait(None))
    try:
        while (data := await queue.get()) is not None:
            if data == DONE:
                continue
            try:
                chunk = json.loads(data)
            except ValueError:
                raise StreamError(f"the stream carried an event that is not JSON: {data[:80]!r}") from None
            if not isinstance(chunk, dict):
                raise StreamError(f"the stream carried an event that is not a JSON object: {data[:80]!r}")
            if "error" in chunk:
                raise EventError(error_message(data))
            yield chunk
        await ended  # raises why the answer ended badly
    finally:
        if ended.done():
            if not ended.cancelled():
                ended.exception()  # retrieved: an error after an early exit is not logged as lost
        else:
            ended.cancel()  # the connection closed below is no error
        transport.close()


async def _open(
    base_url: str,
    path: str,
    payload: dict[str, Any],
    on_data: Callable[[bytes], None],
    headers: dict[str, str] | None,
    connect_timeout_s: float,
) -> tuple[asyncio.Transport, asyncio.Future]:
    """Connect, send the request; the transport and the future set when the answer has ended."""
    url = urlsplit(base_url)
    if url.scheme not in ("http", "https"):
        raise ValueError(f"the streaming client speaks http:// and https:// only, not {base_url!r}")
    if url.hostname is None:
        raise ValueError(f"no host in {base_url!r}")
    tls = url.scheme == "https"
    loop = asyncio.get_running_loop()
    ended = loop.create_future()
    try:
        transport, _ = await asyncio.wait_for(
            loop.create_connection(
                lambda: _EventStream(on_data, ended),
                url.hostname,
                url.port or (443 if tls else 80),
                ssl=ssl.create_default_context() if tls else None,
            ),
            connect_timeout_s,
        )
    except TimeoutError:
        raise StreamError(f"cannot reach {base_url}: no answer within {connect_timeout_s:g} s") from None
    except ConnectionRefusedError:
        raise StreamError(f"cannot reach {base_url}: nothing listens there") from None
    except OSError as exc:
        raise StreamError(f"cannot reach {base_url}: {exc}") from exc
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
    return transport, ended


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
        self.events = SseReader()  # the body's events
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
            self._end(StreamError("the server closed the connection without an answer"))
        elif self.chunked or self.remaining > 0:
            self._end(StreamError("the server closed the connection before the answer's end"))
        elif exc is not None:
            self._end(StreamError(f"the connection broke: {exc}"))
        else:  # a body that runs up to the close: its end
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
        else:  # a body that runs up to the close
            piece, self.buffer = self.buffer, b""
            self._body_piece(piece)

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
        for data in self.events.feed(piece):
            self.on_data(data)

    def _finish(self) -> None:
        if self.status == 200:
            self._end(None)
        else:
            body = b"".join(self.body)
            self._end((InvalidRequest if self.status in INVALID_REQUEST else HTTPStatusError)(self.status, body))

    def _end(self, exc: Exception | None) -> None:
        if self.ended.done():
            return
        if exc is None:
            self.ended.set_result(None)
        else:
            self.ended.set_exception(exc)
