"""The API key: when set, every route but GET /health needs `Authorization: Bearer KEY`.

A pure ASGI middleware, so it guards HTTP routes and the WebSocket event stream alike (a
WebSocket without the key is closed before it is accepted: the handshake gets a 403).
Keys are compared as SHA-256 digests in constant time, as vLLM does.
"""

import hashlib
import secrets

from starlette.types import ASGIApp, Receive, Scope, Send

from enginetui.core.entrypoints.openai.errors import error_response, unauthorized

OPEN_PATHS = frozenset({"/health"})  # answered without the key (liveness probes)
WS_POLICY_VIOLATION = 1008  # WebSocket close code for a refused key


class APIKeyMiddleware:
    def __init__(self, app: ASGIApp, api_key: str) -> None:
        self.app = app  # the guarded app
        self._digest = hashlib.sha256(api_key.encode()).digest()  # of the one valid key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] not in ("http", "websocket")
            or scope.get("method") == "OPTIONS"
            or scope["path"] in OPEN_PATHS
            or self._valid(scope)
        ):
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": WS_POLICY_VIOLATION, "reason": "Unauthorized"})
        else:
            await error_response(unauthorized())(scope, receive, send)

    def _valid(self, scope: Scope) -> bool:
        header = dict(scope.get("headers") or ()).get(b"authorization", b"").decode("latin-1")
        scheme, _, key = header.partition(" ")
        if scheme.lower() != "bearer":
            return False
        return secrets.compare_digest(hashlib.sha256(key.encode()).digest(), self._digest)
