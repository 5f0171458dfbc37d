"""The FastAPI app around one engine, and running it with uvicorn.

    app = build_app(engine, served_model_name=None, api_key=None)   # None: served_model.default_served_name
    await serve_app(app, listen_socket("127.0.0.1", 8000))   # until SIGINT / SIGTERM

Routes: POST /v1/completions, POST /v1/chat/completions, GET /v1/models, GET /health,
GET /metrics, POST /tokenize, POST /detokenize, and the dashboards' /v1/enginetui/* (live.py).
The caller owns the engine: it is started before the app and shut down after it.
"""

import asyncio
import contextlib
import json
import logging
import socket
from http import HTTPStatus

import uvicorn
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from enginetui.core.entrypoints.openai import live
from enginetui.core.entrypoints.openai.access_log import AccessLogMiddleware
from enginetui.core.entrypoints.openai.auth import APIKeyMiddleware
from enginetui.core.entrypoints.openai.chat_protocol import ChatCompletionRequest
from enginetui.core.entrypoints.openai.chat_template import render_chat
from enginetui.core.entrypoints.openai.completion_protocol import CompletionRequest
from enginetui.core.entrypoints.openai.control_gate import DEFAULT_MAX_PAUSE_S, ControlGate
from enginetui.core.entrypoints.openai.errors import APIError, install_error_handlers
from enginetui.core.entrypoints.openai.metrics import MeteredEngine, ServerMetrics
from enginetui.core.entrypoints.openai.protocol import (
    DetokenizeRequest,
    DetokenizeResponse,
    ModelCard,
    ModelList,
    TokenizeChatRequest,
    TokenizeCompletionRequest,
    TokenizeResponse,
)
from enginetui.core.entrypoints.openai.served_model import EMBEDDED_ALIAS, ServedModel, default_served_name
from enginetui.core.entrypoints.openai.serving_chat import create_chat_completion
from enginetui.core.entrypoints.openai.serving_completion import create_completion
from enginetui.core.entrypoints.tcp_listen import tcp_listener

GRACEFUL_SHUTDOWN_S = 3  # how long open answers may take to end after SIGINT / SIGTERM before they are cut
TICK_S = 1.0  # how often the server looks whether it should stop (it is also woken when told to)
# uvicorn's own lines at a stop; the server's caller says it stopped in one line instead.
UVICORN_STOP_LINES = frozenset(
    {
        "Shutting down",
        "Waiting for connections to close. (CTRL+C to force quit)",
        "Waiting for background tasks to complete. (CTRL+C to force quit)",
        "Finished server process [%d]",
    }
)


def build_app(
    engine,
    served_model_name: str | None = None,
    api_key: str | None = None,
    allow_control: bool = False,
    max_pause_s: float = DEFAULT_MAX_PAUSE_S,
    access_log: bool = True,
    access_log_excluded: frozenset[str] = frozenset(),
) -> FastAPI:
    """The server's app over `engine` (an AsyncLLM, or a MeteredEngine around one). Attached
    dashboards watch; with `allow_control` they may also pause, step and slow it (control_gate.py).
    `access_log`: a line per request (access_log.py), but for the paths in `access_log_excluded`."""
    name = served_model_name or default_served_name(engine)
    if not isinstance(engine, MeteredEngine):
        engine = MeteredEngine(engine, ServerMetrics(name, engine.info, getattr(engine, "config", None)))
    embedded = engine.model_name == EMBEDDED_ALIAS and not served_model_name
    served = ServedModel(
        engine=engine,
        name=name,
        tokenizer=engine.tokenizer,
        max_model_len=engine.info.max_model_len,
        root=engine.info.model_dir,
        eos_token_ids=engine.processor.eos_token_ids,
        default_sampling=engine.info.default_sampling,
        aliases=(EMBEDDED_ALIAS,) if embedded else (),
    )
    app = FastAPI(title="enginetui", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.served = served  # the engine and its rules, for the routes
    install_error_handlers(app)
    if api_key:
        app.add_middleware(APIKeyMiddleware, api_key=api_key)
    if access_log:  # outside the key check: refused requests are logged too
        app.add_middleware(AccessLogMiddleware, excluded_paths=access_log_excluded)
    app.state.ended_at_stop = 0  # requests still open when the server stopped (ended with finish_reason "abort")
    _add_openai_routes(app, served)
    _add_utility_routes(app, served)
    app.state.control_gate = ControlGate(engine, allow_control, max_pause_s)  # the engine's controls, for clients
    live.add_routes(app, served, app.state.control_gate)
    return app


def _add_openai_routes(app: FastAPI, served: ServedModel) -> None:
    @app.post("/v1/completions")
    async def completions(body: CompletionRequest, raw: Request):
        return await create_completion(served, body, raw)

    @app.post("/v1/chat/completions")
    async def chat_completions(body: ChatCompletionRequest, raw: Request):
        return await create_chat_completion(served, body, raw)

    @app.get("/v1/models")
    async def models() -> JSONResponse:
        card = ModelCard(id=served.name, root=served.root or served.name, max_model_len=served.max_model_len)
        return JSONResponse(ModelList(data=[card]).model_dump())


def _add_utility_routes(app: FastAPI, served: ServedModel) -> None:
    @app.get("/health")
    async def health() -> Response:
        """200 while the engine runs, 503 once it has died (as vLLM)."""
        return Response(status_code=200 if served.engine.is_running else int(HTTPStatus.SERVICE_UNAVAILABLE))

    @app.get("/metrics")
    async def metrics() -> Response:
        if served.engine.is_running:
            served.engine.metrics.observe_state(await served.engine.snapshot())
        return Response(served.engine.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.post("/tokenize")
    async def tokenize(raw: Request) -> JSONResponse:
        body = await _json_body(raw)
        chat = isinstance(body, dict) and "messages" in body
        req: TokenizeChatRequest | TokenizeCompletionRequest
        try:
            req = (TokenizeChatRequest if chat else TokenizeCompletionRequest).model_validate(body)
        except ValidationError as exc:
            raise RequestValidationError(exc.errors()) from exc
        served.check_request(req, req.model)
        if isinstance(req, TokenizeChatRequest):
            text = render_chat(
                served.tokenizer, req.messages, req.add_generation_prompt, req.continue_final_message, None
            )
        else:
            text = req.prompt
        ids = served.tokenize(text, req.add_special_tokens)
        strs = served.tokenizer.convert_ids_to_tokens(ids) if req.return_token_strs else None
        return JSONResponse(
            TokenizeResponse(
                count=len(ids), max_model_len=served.max_model_len, tokens=ids, token_strs=strs
            ).model_dump()
        )

    @app.post("/detokenize")
    async def detokenize(body: DetokenizeRequest) -> JSONResponse:
        served.check_request(body, body.model)
        return JSONResponse(DetokenizeResponse(prompt=served.decode(body.tokens)).model_dump())


async def _json_body(raw: Request):
    """The body as JSON (for routes whose body model depends on its content); 422 when it is not JSON."""
    try:
        return json.loads(await raw.body())
    except ValueError as exc:
        raise APIError(
            f"The request body is not valid JSON: {exc}", HTTPStatus.UNPROCESSABLE_ENTITY, "UnprocessableEntityError"
        ) from exc


class _Server(uvicorn.Server):
    """uvicorn's server; `handle_signals=False` leaves SIGINT / SIGTERM to the host (e.g. the dashboard).
    At a stop, every open request is aborted first, so each answer (a stream too) ends with
    finish_reason "abort" (and `data: [DONE]`) before its connection closes.

    uvicorn's own loop wakes ten times a second to look whether it should stop; on a machine whose
    cores the engine's threads fill, each wake stalls an engine step (core/engine/wake_queue.py).
    This one ticks once a second (the Date header it refreshes is per second anyway) and is woken
    the moment `should_exit` is set, from a signal handler or from the host."""

    _exit_asked: asyncio.Event | None = None  # set with should_exit, while main_loop runs
    _loop: asyncio.AbstractEventLoop | None = None  # main_loop's event loop

    def __init__(self, config: uvicorn.Config, app: FastAPI, handle_signals: bool) -> None:
        super().__init__(config)
        self.app = app  # the served app: its engine's open requests are ended at a stop
        self.handle_signals = handle_signals  # install uvicorn's SIGINT / SIGTERM handlers

    @property
    def should_exit(self) -> bool:
        return self._should_exit

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        self._should_exit = value  # uvicorn sets it in __init__, from its signal handler, and we at a host's stop
        if value and self._exit_asked is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._exit_asked.set)  # safe from a signal handler too

    async def main_loop(self) -> None:
        self._loop, self._exit_asked = asyncio.get_running_loop(), asyncio.Event()
        while not await self.on_tick(0):  # tick 0: the Date header is refreshed on every tick
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._exit_asked.wait(), TICK_S)

    @contextlib.contextmanager
    def capture_signals(self):
        if self.handle_signals:
            with super().capture_signals():
                yield
        else:
            yield

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        engine = self.app.state.served.engine
        self.app.state.control_gate.close()
        if engine.is_running:
            self.app.state.ended_at_stop = await engine.abort_open()
        await super().shutdown(sockets)


class _QuietStop(logging.Filter):
    """Drops uvicorn's lines about stopping (UVICORN_STOP_LINES)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg not in UVICORN_STOP_LINES


def listen_socket(host: str, port: int) -> socket.socket:
    """A socket listening on host:port (port 0: a free one), so a taken port fails before anything starts.
    It listens at once: the server prints its URL before uvicorn runs, and a client that connects in
    between waits in the backlog until uvicorn accepts (before, it was refused)."""
    try:
        return tcp_listener(host, port)
    except OSError as exc:
        raise OSError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


async def serve_app(
    app: FastAPI, sock: socket.socket, stop: asyncio.Event | None = None, log_level: str = "info"
) -> None:
    """Serve on `sock` until SIGINT / SIGTERM; open requests are then aborted, and their answers get
    GRACEFUL_SHUTDOWN_S to end. The socket is closed at the end; `app.state.ended_at_stop` says how
    many requests were still open.

    With `stop`, the server is a guest in a host (the dashboard of `enginetui --serve`): it ends
    when `stop` is set, and leaves signals and logging configuration to the host.
    """
    config = uvicorn.Config(
        app,
        log_level=log_level,
        access_log=False,
        lifespan="off",
        ws="websockets-sansio",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        log_config=None if stop is not None else uvicorn.config.LOGGING_CONFIG,
    )
    server = _Server(config, app, handle_signals=stop is None)
    quiet = _QuietStop()
    logging.getLogger("uvicorn.error").addFilter(quiet)

    async def stop_when_asked(stop: asyncio.Event) -> None:
        await stop.wait()
        server.should_exit = True

    watcher = asyncio.ensure_future(stop_when_asked(stop)) if stop is not None else None
    try:
        await server.serve(sockets=[sock])
    finally:
        if watcher is not None:
            watcher.cancel()
        logging.getLogger("uvicorn.error").removeFilter(quiet)
        sock.close()
