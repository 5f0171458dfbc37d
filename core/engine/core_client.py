"""The EngineCore clients: one base class, a sync and an asyncio variant, made by one factory.

    EngineCoreClient.make(config, asyncio_mode=False)  -> SyncClient   (LLM, LLMEngine)
    EngineCoreClient.make(config, asyncio_mode=True)   -> AsyncClient  (AsyncLLM: the dashboard, the server)

As vLLM's (InprocClient / SyncMPClient / AsyncMPClient), but either variant runs EngineCore in a
child process (the default) or, with `multiprocess=False` or ENGINETUI_MULTIPROC=0, on a thread of
this process over the same sockets and messages (engine_host.py), so debugging in-process runs the
production code. Reads poll with a short timeout and check that EngineCore is alive, so a dead one
raises EngineDeadError instead of hanging.
"""

import asyncio
import itertools
import os
import weakref
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, cast

import msgspec
import zmq
import zmq.asyncio

from enginetui.core.config import EngineConfig
from enginetui.core.engine import control, wire
from enginetui.core.engine.engine_host import POLL_MS, EngineHost, EngineProcess, EngineThread
from enginetui.core.engine.errors import EngineDeadError
from enginetui.core.engine.events import MissedEvents, StepEvent, decode_event
from enginetui.core.outputs import EngineCoreOutputs, EngineCoreRequest

MULTIPROC_ENV = "ENGINETUI_MULTIPROC"
SUB_RCVHWM = 64  # events a subscriber buffers before the publisher starts dropping
CATCH_UP_QUIET_MS = 100  # quiet after an event before a subscriber fetches a snapshot to end level


def use_multiprocess(flag: bool | None) -> bool:
    """The explicit flag if given, else ENGINETUI_MULTIPROC (default on)."""
    if flag is not None:
        return flag
    return os.environ.get(MULTIPROC_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


class EngineCoreClient:
    """Starts EngineCore (child process or thread) and ends it on every path."""

    def __init__(
        self,
        config: EngineConfig,
        multiprocess: bool | None = None,
        startup_timeout: float | None = None,
        log_file: str | None = None,
    ) -> None:
        self.config = config  # engine configuration
        ctx = zmq.Context()
        if use_multiprocess(multiprocess):
            self.host: EngineHost = EngineProcess(config, ctx, startup_timeout, log_file=log_file)
        else:
            self.host = EngineThread(config, ctx, startup_timeout)  # log_file: the host's own output is ours
        self.info = self.host.info  # limits and identity (info.pid is EngineCore's process)
        self.engine_pid = self.host.pid  # EngineCore's process id (None when it runs on a thread here)
        self.events_address = self.host.addresses.events  # where StepEvents are published
        self._call_ids = itertools.count(1)  # control call ids
        # Ends EngineCore when this client is garbage collected or at interpreter exit.
        self._finalizer = weakref.finalize(self, self.host.shutdown)

    @staticmethod
    def make(
        config: EngineConfig,
        *,
        asyncio_mode: bool,
        multiprocess: bool | None = None,
        log_file: str | None = None,
        startup_timeout: float | None = None,
    ) -> "SyncClient | AsyncClient":
        """The client for a caller: blocking (asyncio_mode=False) or asyncio."""
        cls = AsyncClient if asyncio_mode else SyncClient
        return cls(config, multiprocess=multiprocess, startup_timeout=startup_timeout, log_file=log_file)

    @property
    def core(self):
        """The in-process EngineCore (None in multiprocess mode): for tests and debugging only."""
        return getattr(self.host, "core", None)

    @property
    def is_alive(self) -> bool:
        return self.host.dead is None and self.host.is_alive()

    def shutdown(self) -> None:
        """End EngineCore and free the sockets. Idempotent."""
        self._finalizer()

    def _control_message(self, op: str, value: Any) -> wire.Control:
        """A validated control call (control.BadControlCall, a ValueError, before anything is sent)."""
        self.host.check()
        control.check(op, value)
        return wire.Control(call_id=next(self._call_ids), op=op, value=value)


def _reply_result(reply: wire.ControlReply) -> Any:
    if reply.error is not None:
        control.raise_error(reply.error)
    return reply.result


class SyncClient(EngineCoreClient):
    """Blocking client: LLMEngine (and so LLM) uses it."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._outputs: deque[EngineCoreOutputs] = deque()  # outputs that arrived during control calls

    def add_request(self, request: EngineCoreRequest) -> None:
        self._send(wire.AddRequest(request=request))

    def abort_requests(self, request_ids: list[str]) -> None:
        if request_ids:
            self._send(wire.AbortRequests(request_ids=list(request_ids)))

    def get_output(self) -> EngineCoreOutputs:
        """The next outputs EngineCore produced; blocks until there are some (or it dies)."""
        if self._outputs:
            return self._outputs.popleft()
        while True:
            msg = self._recv()
            if isinstance(msg, wire.Outputs):
                return msg.outputs

    def call(self, op: str, value: Any = None) -> Any:
        """One control call (core.engine.control.OPS); returns its result. Outputs that arrive
        meanwhile are kept, in order, for get_output()."""
        msg = self._control_message(op, value)
        self._send(msg)
        while True:
            reply = self._recv()
            if isinstance(reply, wire.Outputs):
                self._outputs.append(reply.outputs)
            elif isinstance(reply, wire.ControlReply) and reply.call_id == msg.call_id:
                return _reply_result(reply)

    def _send(self, msg: msgspec.Struct) -> None:
        while not self.host.send_nowait(msg):
            self.host.in_sock.poll(POLL_MS, zmq.POLLOUT)

    def _recv(self) -> wire.OutputMessage:
        host, sock = self.host, self.host.out_sock
        while True:
            if host.dead is not None:
                raise host.dead
            if sock.poll(POLL_MS):
                msg = wire.decode_output(sock.recv())
                if isinstance(msg, wire.EngineFailed):
                    raise host.failed(msg.error)
                return msg
            if not host.is_alive() and sock.poll(0):
                continue  # read what it sent before dying first
            host.check()


class AsyncClient(EngineCoreClient):
    """asyncio client (zmq.asyncio). `get_output()` must be awaited continuously by one task
    (AsyncLLM's output handler): it also resolves control calls."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        host = self.host
        self._out = _OutputReader(host.out_sock)
        # Closed at shutdown in the socket's place: it clears its event-loop reader first.
        host.sockets[host.sockets.index(host.out_sock)] = self._out
        self._calls: dict[int, asyncio.Future] = {}  # control calls awaiting their reply

    async def add_request(self, request: EngineCoreRequest) -> None:
        await self._send(wire.AddRequest(request=request))

    async def abort_requests(self, request_ids: list[str]) -> None:
        if request_ids:
            await self._send(wire.AbortRequests(request_ids=list(request_ids)))

    async def get_output(self) -> EngineCoreOutputs:
        """The next outputs; resolves control replies on the way. Raises EngineDeadError."""
        try:
            while True:
                msg = await self._recv()
                if isinstance(msg, wire.Outputs):
                    return msg.outputs
                if isinstance(msg, wire.ControlReply):
                    fut = self._calls.pop(msg.call_id, None)
                    if fut is not None and not fut.done():
                        fut.set_result(msg)
        except EngineDeadError as exc:
            self._fail_calls(exc)
            raise

    async def call(self, op: str, value: Any = None) -> Any:
        """One control call; its reply is delivered through get_output(), which must be running."""
        msg = self._control_message(op, value)
        fut = asyncio.get_running_loop().create_future()
        self._calls[msg.call_id] = fut
        try:
            await self._send(msg)
            return _reply_result(await fut)
        finally:
            self._calls.pop(msg.call_id, None)

    async def events(
        self, conflate: bool = False, catch_up: Callable[[], Awaitable[StepEvent]] | None = None
    ) -> AsyncIterator[StepEvent]:
        """Live events; the first one is a snapshot sent because this subscriber joined.
        Ends when the client is shut down; raises EngineDeadError if EngineCore dies.

        A subscriber that fell behind may have lost the last events before the engine went quiet,
        and nothing newer would come to show the state it lost. So once the stream has been quiet
        for CATCH_UP_QUIET_MS after an event, `catch_up()` (a control call for a snapshot) is
        awaited. A snapshot newer than the latest event is held for one more quiet spell, since the
        events it covers may still be on their way (they come by another socket than the reply):
        if they arrive, it is dropped; if not, it is yielded, and events it covers that arrive later
        are skipped. The stream then always ends level with the engine, in order. Conflating skips
        all that: its newest event is never dropped."""
        self.host.check()
        ctx = zmq.asyncio.Context()  # its own: the client's context is destroyed at shutdown, not waited on
        sock = ctx.socket(zmq.SUB)
        sock.setsockopt(zmq.LINGER, 0)
        if conflate:
            sock.setsockopt(zmq.CONFLATE, 1)  # keep only the newest event
        else:
            sock.setsockopt(zmq.RCVHWM, SUB_RCVHWM)
        sock.connect(self.events_address)
        sock.setsockopt(zmq.SUBSCRIBE, b"")
        missed = None if conflate else MissedEvents()  # conflating skips events on purpose
        # Steps published between the subscription and the publisher's answer to it can arrive
        # before the snapshot; the snapshot already holds their effect, so they are dropped.
        # (Conflating keeps only the newest event: the snapshot may be gone, nothing is dropped.)
        greeted = conflate
        level = True  # no event arrived since the latest catch-up (or there is nothing to catch up)
        held: StepEvent | None = None  # a catch-up snapshot newer than the latest event, held one quiet spell
        covered = -1  # seq of the latest catch-up snapshot yielded: events up to it are in it
        try:
            while True:
                if await sock.poll(POLL_MS if level and held is None else CATCH_UP_QUIET_MS):
                    event = decode_event(await sock.recv())
                    if (not greeted and not event.is_snapshot) or event.seq <= covered:
                        continue
                    greeted = True
                    level = missed is None or catch_up is None
                    if held is not None and event.seq >= held.seq:
                        held = None  # the events it stood for arrived
                    yield event if missed is None else missed.mark(event)
                    continue
                if self.host.closed:
                    return  # shut down: the stream ends
                self.host.check()
                if held is not None:
                    assert missed is not None and missed.last_seq is not None  # held only after a catch-up (below)
                    if held.seq > missed.last_seq:
                        covered = held.seq
                        yield missed.mark(held)
                    held = None
                elif not level:
                    # `level` drops only with both, at an event, which `missed.mark` has seen by now
                    assert missed is not None and catch_up is not None and missed.last_seq is not None
                    level = True
                    try:
                        latest = await catch_up()
                    except EngineDeadError:
                        continue  # the next poll's check ends the stream
                    if latest.seq > missed.last_seq:
                        held = latest
        finally:
            sock.close(linger=0)
            ctx.term()

    def shutdown(self) -> None:
        self._fail_calls(EngineDeadError("EngineCore was shut down"))
        super().shutdown()

    async def _send(self, msg: msgspec.Struct) -> None:
        while not self.host.send_nowait(msg):
            await asyncio.sleep(0.005)

    async def _recv(self) -> wire.OutputMessage:
        host = self.host
        sock = host.out_sock
        while True:
            if host.dead is not None:
                raise host.dead
            try:
                data = sock.recv(zmq.NOBLOCK)
            except zmq.Again:
                if not await self._out.readable(POLL_MS / 1000):
                    if not host.is_alive() and sock.poll(0):
                        continue
                    host.check()
                continue
            msg = wire.decode_output(data)
            if isinstance(msg, wire.EngineFailed):
                raise host.failed(msg.error)
            return msg

    def _fail_calls(self, exc: BaseException) -> None:
        calls, self._calls = self._calls, {}
        for fut in calls.values():
            if not fut.done():
                try:
                    fut.set_exception(exc)
                except RuntimeError:  # its loop is closed
                    pass


class _OutputReader:
    """Waits for the output socket from the event loop: one reader on its FD stands for the client's
    life (as vLLM's AsyncMPClient reads), where a zmq.asyncio receive adds and drops the reader, a
    future and a timer for each message. Reads themselves are `recv(NOBLOCK)` by the caller."""

    def __init__(self, sock: zmq.Socket) -> None:
        self.sock = sock  # the output socket (PULL)
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop the reader is on
        self._waiter: asyncio.Future[bool] | None = None  # the pending readable(), if any

    async def readable(self, timeout: float) -> bool:
        """Wait until a message may be read (True) or `timeout` seconds pass (False). Call after a
        `recv(NOBLOCK)` raised zmq.Again: zmq signals its FD only for what arrives after that."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._remove_reader()
            loop.add_reader(self.sock.FD, self._on_readable)
            self._loop = loop
        waiter = self._waiter = loop.create_future()
        timer = loop.call_later(timeout, _resolve, waiter, False)
        try:
            return await waiter
        finally:
            timer.cancel()
            self._waiter = None

    def close(self, linger: int | None = None) -> None:
        self._remove_reader()
        self.sock.close(linger=linger)

    def _on_readable(self) -> None:
        # Reading EVENTS also clears the FD's signal (zmq's FD is edge-like: left set, the reader would spin).
        try:
            ready = bool(cast(int, self.sock.getsockopt(zmq.EVENTS)) & zmq.POLLIN)
        except zmq.ZMQError:  # closed
            ready = True
        if ready and self._waiter is not None:
            _resolve(self._waiter, True)

    def _remove_reader(self) -> None:
        loop, self._loop = self._loop, None
        if loop is not None and not loop.is_closed():
            try:
                loop.remove_reader(self.sock.FD)
            except (RuntimeError, zmq.ZMQError):  # the loop or the socket is gone
                pass


def _resolve(fut: asyncio.Future[bool], value: bool) -> None:
    if not fut.done():
        fut.set_result(value)
