"""One access-log line per request, written when its answer is complete (or its client left):

    INFO:     127.0.0.1:50312 - "POST /v1/completions HTTP/1.1" 200 0.53s
    INFO:     127.0.0.1:50318 - "POST /v1/completions HTTP/1.1" 499 client closed the connection 2.00s
    INFO:     127.0.0.1:50320 - "WS /v1/enginetui/events" closed 12.41s

uvicorn's line (its own access log is off) with the request's duration added. A pure ASGI
middleware, so streamed answers are timed to their last byte, and a client that goes away
before the answer is complete is logged as 499 (nginx's "client closed request"), once.

What attached dashboards poll (DASHBOARD_POLLED_PATHS, about once a second each) is logged at debug
level, so the server's log keeps to its clients' requests; paths given to `excluded_paths` (vLLM's
`--disable-access-log-for-endpoints`, matched exactly, without the query string) are not logged.
"""

import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("uvicorn.error")  # uvicorn's own logger: its handler and level (--uvicorn-log-level)

CLIENT_CLOSED = 499  # the status logged for a request whose client left before its answer was complete
DASHBOARD_POLLED_PATHS = frozenset({"/v1/enginetui/process"})  # polled by every attached dashboard: debug level


class AccessLogMiddleware:
    def __init__(self, app: ASGIApp, excluded_paths: frozenset[str] = frozenset()) -> None:
        self.app = app  # the logged app
        self.excluded_paths = excluded_paths  # paths whose requests are not logged at all

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] not in ("http", "websocket") or path in self.excluded_paths:
            await self.app(scope, receive, send)
            return
        level = logging.DEBUG if path in DASHBOARD_POLLED_PATHS else logging.INFO
        start = time.perf_counter()
        seen = _Seen()

        async def watch_receive() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect" and not seen.complete:
                seen.client_left = True
            return message

        async def watch_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                seen.status = message["status"]
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                seen.complete = True
            await send(message)

        try:
            await self.app(scope, watch_receive, watch_send)
        except Exception:
            seen.failed = True  # answered with a 500 by the server-error handler outside this middleware
            raise
        finally:
            log.log(
                level,
                "%s - %s %s %.2fs",
                _client(scope),
                _request_line(scope),
                seen.outcome(scope),
                time.perf_counter() - start,
            )


class _Seen:
    """What the middleware saw of one request's answer."""

    def __init__(self) -> None:
        self.status: int | None = None  # the answer's HTTP status, once it started
        self.complete = False  # the answer's last byte was handed to the server
        self.client_left = False  # the client disconnected before that
        self.failed = False  # the app raised: the answer is the 500 of the server-error handler

    def outcome(self, scope: Scope) -> str:
        if scope["type"] == "websocket":
            return "closed"
        if self.failed and not self.client_left:
            return "500"
        if self.client_left or not self.complete:
            return f"{CLIENT_CLOSED} client closed the connection"
        return str(self.status)


def _client(scope: Scope) -> str:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "-"


def _request_line(scope: Scope) -> str:
    path = scope.get("path", "")
    if scope.get("query_string"):
        path += "?" + scope["query_string"].decode("latin-1")
    if scope["type"] == "websocket":
        return f'"WS {path}"'
    return f'"{scope["method"]} {path} HTTP/{scope.get("http_version", "1.1")}"'
