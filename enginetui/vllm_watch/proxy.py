"""The watcher's proxy: vLLM's OpenAI API served on a port of the watcher's own, every request
passed through to vLLM as it is (any method, any route, streamed or not, headers and the API key
included) and its response passed back byte for byte as it arrives, while a `ProxyReport` sees
both go by. Clients pointed at the proxy instead of vLLM are then listed, request by request.

A raw ASGI app on httpx (no framework: nothing is parsed on the way but what the report reads),
served by uvicorn in the watcher's own event loop (`serve`). A client that goes away closes the
upstream response, so vLLM aborts the request as it would for the client itself.
"""

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import Callable, Iterator
from typing import Protocol

import httpx
import uvicorn

from enginetui.core.entrypoints.tcp_listen import tcp_listener

# to reach vLLM (a refused connection fails at once; on a loaded machine a burst's connections can wait seconds
# for the event loop); a response may take as long as it takes
CONNECT_TIMEOUT_S = 30.0
HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"te",
        b"trailers",
        b"transfer-encoding",
        b"upgrade",
        b"host",
        b"content-length",
    }
)  # not forwarded


class ProxyReport(Protocol):
    """What the proxy tells about each request (all called on the event loop)."""

    def proxy_arrived(self, method: str, path: str, body: bytes, client: str, when: float) -> str:
        """A request arrived whole; returns its id."""

    def proxy_responded(self, req_id: str, status: int, when: float) -> None:
        """vLLM's status line arrived."""

    def proxy_data(self, req_id: str, data: bytes, when: float) -> None:
        """Response bytes went by to the client."""

    def proxy_ended(self, req_id: str, error: str, when: float) -> None:
        """The response ended ("" ), broke (why), or the client went away ("abort")."""


class ListeningReport(ProxyReport, Protocol):
    """A ProxyReport that is also told where the proxy listens."""

    def proxy_listening(self, when: float, url: str | None, error: str = "") -> None:
        """The proxy serves vLLM's API at `url`, or cannot (`error`)."""


class VllmProxy:
    """The ASGI app: every request to `upstream`, every response back, each reported."""

    def __init__(self, upstream: str, report: ProxyReport, on_arrival: Callable[[], None] | None = None) -> None:
        self.upstream = upstream.rstrip("/")  # vLLM's http://HOST:PORT
        self.report = report  # where requests and responses are told
        self.on_arrival = on_arrival  # called after each arrival is reported (the watcher reads /metrics at once)
        self.http = httpx.AsyncClient(
            base_url=self.upstream,
            timeout=httpx.Timeout(None, connect=CONNECT_TIMEOUT_S),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=512),
        )

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        body = await _read_body(receive)
        path = scope["raw_path"].decode("latin-1") if scope.get("raw_path") else scope["path"]
        if scope.get("query_string"):
            path += "?" + scope["query_string"].decode("latin-1")
        client = f"{scope['client'][0]}:{scope['client'][1]}" if scope.get("client") else "?"
        req_id = self.report.proxy_arrived(scope["method"], path, body, client, time.time())
        if self.on_arrival is not None:
            self.on_arrival()
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in HOP_BY_HOP]
        relay = asyncio.ensure_future(self._relay(req_id, scope["method"], path, headers, body, send))
        gone = asyncio.ensure_future(_disconnected(receive))
        await asyncio.wait((relay, gone), return_when=asyncio.FIRST_COMPLETED)
        if not relay.done():  # the client went away first: closing the upstream stream aborts it in vLLM
            relay.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await relay
            self.report.proxy_ended(req_id, "abort", time.time())
        elif relay.exception() is not None:  # sending to the client failed
            self.report.proxy_ended(req_id, f"the proxy could not answer: {relay.exception()}", time.time())
        gone.cancel()

    async def _relay(self, req_id: str, method: str, path: str, headers, body: bytes, send) -> None:
        request = self.http.build_request(method, path, headers=headers, content=body)
        try:
            try:
                response = await self.http.send(request, stream=True)
            except httpx.RemoteProtocolError:  # a kept-alive connection vLLM's server closed as it was reused
                response = await self.http.send(request, stream=True)  # (idle: the request never reached vLLM)
        except httpx.HTTPError as exc:
            why = f"vLLM at {self.upstream} did not answer: {exc or type(exc).__name__}"
            self.report.proxy_responded(req_id, 502, time.time())
            await _send_error(send, 502, why)
            self.report.proxy_ended(req_id, why, time.time())
            return
        try:
            self.report.proxy_responded(req_id, response.status_code, time.time())
            kept = [(k, v) for k, v in response.headers.raw if k.lower() not in HOP_BY_HOP - {b"content-length"}]
            await send({"type": "http.response.start", "status": response.status_code, "headers": kept})
            error = ""
            try:
                async for chunk in response.aiter_raw():
                    self.report.proxy_data(req_id, chunk, time.time())
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            except httpx.HTTPError as exc:
                error = f"the stream from vLLM broke: {exc or type(exc).__name__}"
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            self.report.proxy_ended(req_id, error, time.time())
        finally:
            await response.aclose()

    async def close(self) -> None:
        await self.http.aclose()


class _QuietServer(uvicorn.Server):
    """uvicorn in someone else's event loop: the app (Textual) keeps its signal handling."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def listen(host: str, port: int) -> socket.socket:
    """The proxy's listening socket (port 0: any free one); raises OSError when it cannot bind."""
    sock = tcp_listener(host, port)
    sock.setblocking(False)
    return sock


async def serve(proxy: VllmProxy, sock: socket.socket) -> None:
    """Serve the proxy on `sock` until cancelled (then the listening socket and vLLM's connections close)."""
    config = uvicorn.Config(
        proxy,
        lifespan="off",
        log_config=None,
        log_level="critical",
        access_log=False,
        timeout_keep_alive=30,
        backlog=2048,
    )
    server = _QuietServer(config)
    try:
        await server.serve(sockets=[sock])
    finally:
        server.should_exit = True
        await proxy.close()
        sock.close()


async def listen_and_serve(
    upstream: str, report: ListeningReport, host: str, port: int, on_arrival: Callable[[], None] | None = None
) -> None:
    """Serve vLLM's API on host:port, every request passed to `upstream` and reported, until cancelled; `report`
    hears where the proxy listens, or in one line why it cannot."""
    try:
        sock = listen(host, port)
    except OSError as exc:
        report.proxy_listening(time.time(), None, f"the proxy cannot listen on {host}:{port}: {exc.strerror or exc}")
        return
    bound = sock.getsockname()[1]
    report.proxy_listening(time.time(), f"http://{host if ':' not in host else f'[{host}]'}:{bound}")
    await serve(VllmProxy(upstream, report, on_arrival), sock)


async def _read_body(receive) -> bytes:
    parts = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        parts.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(parts)


async def _disconnected(receive) -> None:
    """Returns when the client has gone (uvicorn answers http.disconnect once it has, or once the
    response is complete: the relay is done first then)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def _lifespan(receive, send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _send_error(send, status: int, message: str) -> None:
    body = json.dumps({"error": {"message": message, "type": "BadGateway", "code": status}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})
