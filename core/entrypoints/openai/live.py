"""/v1/enginetui/*: what an attached dashboard needs beyond the OpenAI API.

    GET  /v1/enginetui/info           model, served name, limits, EngineCore pid and device, EngineInfo (JSON)
    WS   /v1/enginetui/events         step events, one msgpack StepEvent per binary frame; the first
                                      is a snapshot with every live request's prompt and output so far
                                      (greeting.py), so a late attach draws the whole state at once
    GET  /v1/enginetui/snapshot       the current state (a StepEvent, JSON)
    GET  /v1/enginetui/process        EngineCore's pid, CPU % and memory (JSON)
    GET  /v1/enginetui/tokenizer      the tokenizer's files (JSON: name -> text), to decode events
    POST /v1/enginetui/control        {"op": OP, "value": V}: a control operation (core/engine/control.py:
                                      pause, resume, step_once, snapshot, reset_prefix_cache,
                                      set_step_interval with V seconds); answers {"op", "result"}, or
                                      {"op", "error": {"code", "message"}} with 400 / 403 / 500
    POST /v1/enginetui/abort          {"request_id": id}: end any request, whoever sent it

Every dashboard sees the one engine; changing it needs --allow-control (control_gate.py). A dashboard
names itself with the X-Enginetui-Dashboard header; the API key guards these routes too (auth.py).
"""

import asyncio
import os
from pathlib import Path
from typing import Any

import msgspec
import psutil
from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from enginetui.core.engine import control
from enginetui.core.engine.errors import EngineDeadError
from enginetui.core.engine.events import encode_event
from enginetui.core.entrypoints.openai.control_gate import DASHBOARD_HEADER, Caller, ControlGate
from enginetui.core.entrypoints.openai.errors import bad_request
from enginetui.core.entrypoints.openai.greeting import full_greeting
from enginetui.core.entrypoints.openai.served_model import ServedModel

PREFIX = "/v1/enginetui"
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "chat_template.jinja",
)  # text files a fast tokenizer is rebuilt from


CONTROL_STATUS = {"bad_call": 400, "not_allowed": 403}  # HTTP status of a failed control call by its code (else 500)


class ControlCall(BaseModel):
    op: str  # a name in core.engine.control.OPS
    value: Any = None  # the op's value (seconds for set_step_interval); checked by control.check


class AbortRequest(BaseModel):
    request_id: str  # the engine request id (as shown in step events)


def add_routes(app: FastAPI, served: ServedModel, gate: ControlGate) -> None:
    engine = served.engine
    process = _EngineProcess(engine.engine_pid or os.getpid())

    @app.get(f"{PREFIX}/info")
    async def info() -> JSONResponse:
        return JSONResponse(
            {
                "served_model_name": served.name,
                "model": engine.model_name,
                "device": engine.device,
                "engine_pid": engine.engine_pid,
                "max_model_len": served.max_model_len,
                "has_tokenizer": served.tokenizer is not None,
                "allow_control": gate.allow,  # False: dashboards watch only
                "max_pause_s": gate.max_pause_s,  # a pause ends after this long at the latest
                "engine": msgspec.to_builtins(engine.info),  # EngineInfo: the attached dashboard's model panel
            }
        )

    @app.websocket(f"{PREFIX}/events")
    async def events(ws: WebSocket) -> None:
        dashboard = ws.headers.get(DASHBOARD_HEADER)  # this dashboard's id (None: not a dashboard)
        await ws.accept()
        forward = asyncio.ensure_future(_forward_events(engine, ws))
        closed = asyncio.ensure_future(_until_closed(ws))
        try:
            await asyncio.wait({forward, closed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (forward, closed):
                task.cancel()
            await asyncio.gather(forward, closed, return_exceptions=True)
            if dashboard and engine.is_running:
                await gate.detached(dashboard)  # what it held (a pause, slow motion) ends with it
        if forward.done() and not forward.cancelled() and forward.exception() is not None:
            await _close(ws, 1011, f"engine event stream failed: {forward.exception()}")
        elif not closed.done():
            await _close(ws, 1000, "the engine closed its event stream")

    @app.get(f"{PREFIX}/snapshot")
    async def snapshot() -> Response:
        return Response(msgspec.json.encode(await engine.snapshot()), media_type="application/json")

    @app.get(f"{PREFIX}/process")
    async def process_stats() -> JSONResponse:
        return JSONResponse(await asyncio.to_thread(process.sample))

    @app.get(f"{PREFIX}/tokenizer")
    async def tokenizer_files() -> JSONResponse:
        folder = getattr(served.tokenizer, "name_or_path", None)
        if served.tokenizer is None or not folder or not Path(folder).is_dir():
            raise bad_request("this server has no tokenizer directory to share")
        files = {name: (Path(folder) / name).read_text() for name in TOKENIZER_FILES if (Path(folder) / name).is_file()}
        return JSONResponse(files)

    @app.post(f"{PREFIX}/control")
    async def control_call(body: ControlCall, raw: Request) -> Response:
        client = raw.client
        caller = Caller(
            address=f"{client.host}:{client.port}" if client else "-", dashboard=raw.headers.get(DASHBOARD_HEADER)
        )
        try:
            result = await gate.call(body.op, body.value, caller)
        except control.ControlFailed as exc:
            return _control_answer({"op": body.op, "error": exc.error}, CONTROL_STATUS.get(exc.error.code, 500))
        except EngineDeadError as exc:
            failed = control.ControlError(code=control.ControlFailed.code, message=f"the engine is not running: {exc}")
            return _control_answer({"op": body.op, "error": failed}, 500)
        return _control_answer({"op": body.op, "result": result}, 200)

    @app.post(f"{PREFIX}/abort")
    async def abort(body: AbortRequest) -> JSONResponse:
        await engine.abort(body.request_id)
        return JSONResponse({"ok": True})


def _control_answer(body: dict, status: int) -> Response:
    return Response(msgspec.json.encode(body), status_code=status, media_type="application/json")


async def _forward_events(engine, ws: WebSocket) -> None:
    greeted = False
    async for event in engine.events():
        if event.is_snapshot and not greeted:  # the greeting (step events published just before it may come first)
            event, greeted = await full_greeting(engine, event), True
        await ws.send_bytes(encode_event(event))


async def _until_closed(ws: WebSocket) -> None:
    """Returns when the dashboard closes the connection (it sends nothing else)."""
    try:
        while True:
            await ws.receive_bytes()
    except (WebSocketDisconnect, RuntimeError, KeyError):
        return


async def _close(ws: WebSocket, code: int, reason: str) -> None:
    try:
        await ws.close(code, reason[:120])
    except RuntimeError:  # already closed
        pass


class _EngineProcess:
    """Reads the EngineCore process with psutil, keeping the handle so CPU % covers the time between calls."""

    def __init__(self, pid: int) -> None:
        self.pid = pid  # EngineCore's process id (this process's when EngineCore runs in it)
        self._proc: psutil.Process | None = None  # the handle, once opened

    def sample(self) -> dict:
        try:
            if self._proc is None:
                self._proc = psutil.Process(self.pid)
            with self._proc.oneshot():
                return {
                    "pid": self.pid,
                    "cpu_percent": self._proc.cpu_percent(interval=None),
                    "rss_mb": self._proc.memory_info().rss / 2**20,
                    "running": True,
                }
        except psutil.Error:
            return {"pid": self.pid, "running": False}
