"""RemoteEngine: the dashboard's `Engine` on a running `enginetui serve`, and `enginetui attach`.

The attached dashboard is the same app as the local one; only the engine differs: step events come
over the server's WebSocket, prompts go through its OpenAI API like any client's, the tokenizer is
the server's own (fetched once, so anyone's requests decode), and pause / step / slow motion go
through POST /v1/enginetui/control only where the server allows it (`--allow-control`; elsewhere
they raise control.ControlNotAllowed and the dashboard says "watch only"). The engine is everyone's,
so this dashboard's requests are sent as `cmpl-<tag>-rN` (tag: random per dashboard) and shown as rN.
"""

import secrets
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import httpx
import msgspec
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from enginetui.core.engine import control
from enginetui.core.engine.engine_info import EngineInfo
from enginetui.core.engine.events import StepEvent, decode_event
from enginetui.core.entrypoints.openai.control_gate import DASHBOARD_HEADER, WATCH_ONLY
from enginetui.core.outputs import CompletionOutput, RequestMetrics, RequestOutput
from enginetui.core.sampling_params import SamplingParams
from enginetui.dashboard.widgets.process_panel import ProcessSample
from enginetui.interrupt import sigterm_quits
from enginetui.openai_client import INVALID_REQUEST, auth_headers, error_message, stream_chunks
from enginetui.serve.request_names import RequestNames

CONNECT_TIMEOUT_S = 10.0  # to reach the server at all
MAX_EVENT_BYTES = 64 * 2**20  # largest step event accepted (a huge pool's block lists)


class AttachError(RuntimeError):
    """The server could not be attached to (unreachable, wrong key, not an enginetui server)."""


class RemoteEngine(control.OpMethods):
    """Implements enginetui.dashboard.engine_link.Engine over HTTP and a WebSocket."""

    def __init__(self, url: str, api_key: str | None, info: dict, tokenizer) -> None:
        self.url = url.rstrip("/")  # http://HOST:PORT
        self.headers = auth_headers(api_key)  # sent on every call
        self.served = info  # the server's /v1/enginetui/info
        self.info = msgspec.convert(info["engine"], EngineInfo)  # the served engine's model, limits and pool
        self.tokenizer = tokenizer  # the server's tokenizer (None: it has none)
        self.names = RequestNames(secrets.token_hex(2))  # this dashboard's request ids <-> the engine's
        self.can_control = bool(info.get("allow_control"))  # the server lets dashboards change its engine
        self.refusal = WATCH_ONLY  # what the dashboard says when a control key is pressed and it cannot control
        # Its id for the server (the tag its request ids carry too): control calls and the event stream.
        self.dashboard_headers = {**self.headers, DASHBOARD_HEADER: self.names.tag}
        self._http: httpx.AsyncClient | None = None  # opened in the app's event loop
        self._probe_http = httpx.Client(base_url=self.url, headers=self.headers, timeout=CONNECT_TIMEOUT_S)

    @classmethod
    def connect(cls, url: str, api_key: str | None) -> "RemoteEngine":
        """Check the server and fetch what the dashboard needs (raises AttachError)."""
        with httpx.Client(
            base_url=url.rstrip("/"),
            timeout=CONNECT_TIMEOUT_S,
            headers=auth_headers(api_key),
        ) as http:
            info = _json(http, "/v1/enginetui/info", url)
            files = _json(http, "/v1/enginetui/tokenizer", url) if info.get("has_tokenizer") else None
        return cls(url, api_key, info, _load_tokenizer(files) if files else None)

    # ---- identity (the Engine protocol) -------------------------------------------------------

    @property
    def engine_pid(self) -> int | None:
        return self.served.get("engine_pid")

    @property
    def model_name(self) -> str:
        return self.served["served_model_name"]

    @property
    def device(self) -> str:
        return f"{self.info.device} · {self.url}" + ("" if self.can_control else " · watch only")

    # ---- requests -------------------------------------------------------------------------------

    async def generate(self, prompt: str, params: SamplingParams, request_id: str) -> AsyncIterator[RequestOutput]:
        """Stream one prompt through the server's /v1/completions; yields cumulative RequestOutputs.
        An invalid request raises ValueError with the server's message (as the local engine does), any
        other failure openai_client.StreamError."""
        body = {
            **msgspec.structs.asdict(params),
            "prompt": prompt,
            "stream": True,
            "return_token_ids": True,
            "model": self.model_name,
        }
        if body["max_tokens"] is None:
            body["max_tokens"] = self.served["max_model_len"]  # up to max_model_len (the server caps it)
        if body["stop"] is None:
            body["stop"] = []
        out = _Assembly(request_id, prompt)
        headers = {**self.headers, "X-Request-Id": self.names.header(request_id)}
        async with aclosing(stream_chunks(self.url, "/v1/completions", body, headers, CONNECT_TIMEOUT_S)) as chunks:
            async for chunk in chunks:
                for choice in chunk["choices"]:
                    yield out.add(choice)

    async def abort(self, request_id: str) -> None:
        await self._post("/v1/enginetui/abort", {"request_id": self.names.engine(request_id)})

    # ---- control --------------------------------------------------------------------------------

    async def control(self, op: str, value=None):
        """One control operation (core.engine.control.OPS) on the server's engine; its result.
        Raises the exception its typed error names: ControlNotAllowed on a watch-only server,
        BadControlCall (a ValueError) for a bad call."""
        control.check(op, value)
        r = await self._client().post(
            "/v1/enginetui/control", json={"op": op, "value": value}, headers=self.dashboard_headers
        )
        if r.status_code == 200:
            return msgspec.json.decode(r.content, type=_ControlAnswer).result
        try:
            answer = msgspec.json.decode(r.content, type=_ControlAnswer)
        except msgspec.DecodeError:  # not the control route's answer (e.g. a 401 from the key check)
            raise _request_error(r) from None
        if answer.error is None:
            raise _request_error(r)
        control.raise_error(answer.error)

    async def snapshot(self) -> StepEvent:
        r = await self._client().get("/v1/enginetui/snapshot")
        _check(r)
        return self.names.local_event(msgspec.json.decode(r.content, type=StepEvent))

    async def events(self) -> AsyncIterator[StepEvent]:
        """The server's step events (the first is a snapshot); ends when the server closes the stream."""
        url = self.url.replace("http://", "ws://", 1).replace("https://", "wss://", 1) + "/v1/enginetui/events"
        try:
            async with ws_connect(
                url, additional_headers=self.dashboard_headers, max_size=MAX_EVENT_BYTES, open_timeout=CONNECT_TIMEOUT_S
            ) as ws:
                async for frame in ws:
                    yield self.names.local_event(decode_event(frame))
        except InvalidStatus as exc:
            raise AttachError(
                f"the server refused the event stream (HTTP {exc.response.status_code}): is the API key right?"
            ) from exc
        except (ConnectionClosed, OSError) as exc:
            raise AttachError(f"the server at {self.url} went away ({exc})") from exc

    # ---- process panel --------------------------------------------------------------------------

    def probe(self, pid: int) -> ProcessSample | None:
        """EngineCore's CPU and memory, as the server reads them (a ProcessProbe; runs in a thread)."""
        try:
            stats = self._probe_http.get("/v1/enginetui/process").json()
        except (httpx.HTTPError, ValueError):
            return None
        if not stats.get("running"):
            return None
        return ProcessSample(pid=stats["pid"], cpu_percent=stats["cpu_percent"], rss_mb=stats["rss_mb"])

    # ---- lifecycle ------------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Leaves the server and its engine running; this dashboard's open requests end with their streams."""
        self._probe_http.close()

    # ---- plumbing -------------------------------------------------------------------------------

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(
                base_url=self.url, headers=self.headers, timeout=httpx.Timeout(CONNECT_TIMEOUT_S, read=None)
            )
        return self._http

    async def _post(self, path: str, body: dict | None = None) -> None:
        _check(await self._client().post(path, json=body or {}))


class _ControlAnswer(msgspec.Struct):
    """The server's answer to a control call (core/entrypoints/openai/live.py)."""

    op: str  # the op called
    result: Any = None  # what it returned (JSON: a snapshot comes back as a dict, unused here)
    error: control.ControlError | None = None  # why it failed (None: it succeeded)


class _Assembly:
    """One request's RequestOutput, cumulated from its completion chunks."""

    def __init__(self, request_id: str, prompt: str) -> None:
        now = time.time()
        self.output = RequestOutput(
            request_id=request_id,
            prompt=prompt,
            prompt_token_ids=[],
            outputs=[CompletionOutput(index=0, text="", token_ids=[])],
            finished=False,
            metrics=RequestMetrics(arrival_time=now),
        )

    def add(self, choice: dict) -> RequestOutput:
        out, completion, m = self.output, self.output.outputs[0], self.output.metrics
        now = time.time()
        if choice.get("prompt_token_ids"):
            out.prompt_token_ids = choice["prompt_token_ids"]
        if choice.get("token_ids"):
            completion.token_ids = completion.token_ids + choice["token_ids"]
            m.first_token_time = m.first_token_time or now
            m.last_token_time = now
        completion.text += choice["text"]
        out.new_text = choice["text"]
        if choice.get("finish_reason"):
            completion.finish_reason = choice["finish_reason"]
            completion.stop_reason = choice.get("stop_reason")
            out.finished = True
            m.finished_time = now
        return out


def _json(http: httpx.Client, path: str, url: str):
    try:
        r = http.get(path)
    except httpx.HTTPError as exc:
        raise AttachError(f"cannot reach {url}: {exc}") from exc
    if r.status_code == 401:
        raise AttachError(f"{url} wants an API key: pass --api-key KEY (or set ENGINETUI_API_KEY)")
    if r.status_code == 404:
        raise AttachError(f"{url} is not an enginetui server (no {path})")
    _check(r)
    return r.json()


def _check(r: httpx.Response) -> None:
    if r.status_code >= 400:
        raise _request_error(r)


def _request_error(r: httpx.Response) -> Exception:
    """ValueError for a refused request (the dashboard shows it as rejected), RuntimeError otherwise."""
    message = error_message(r.content) if r.content else r.reason_phrase
    return (ValueError if r.status_code in INVALID_REQUEST else RuntimeError)(f"HTTP {r.status_code}: {message}")


def _load_tokenizer(files: dict[str, str]):
    """The server's tokenizer, rebuilt from its files."""
    from transformers import AutoTokenizer

    with tempfile.TemporaryDirectory(prefix="enginetui-tokenizer-") as folder:
        for name, text in files.items():
            (Path(folder) / Path(name).name).write_text(text)
        return AutoTokenizer.from_pretrained(folder)


def attach_dashboard(url: str, api_key: str | None, *, burst_size: int, redraw_hz: float, max_cpu_share: float) -> int:
    """`enginetui attach URL`: the dashboard on a running server, until q."""
    from enginetui.dashboard.app import EngineTUI

    print(f"enginetui attach: connecting to {url}…", file=sys.stderr)
    try:
        engine = RemoteEngine.connect(url, api_key)
    except AttachError as exc:
        print(f"enginetui attach: {exc}", file=sys.stderr)
        return 2
    app = EngineTUI(engine, probe=engine.probe, burst_size=burst_size, redraw_hz=redraw_hz, max_cpu_share=max_cpu_share)
    try:
        with sigterm_quits(app):
            app.run()
    finally:
        engine.shutdown()
    return app.return_code or 0
