"""Clients that run EngineCore in a child process and talk to it over ZMQ (ipc://).

Sockets, all bound on the client side except the event publisher:

    client PUSH  --input-->   EngineCore PULL     AddRequest / AbortRequests / Control / Shutdown
    client PULL  <--output--  EngineCore PUSH     Ready / StartupFailed / Outputs / ControlReply / EngineFailed
    any SUB      <--events--  EngineCore XPUB     StepEvent (one per step, plus a snapshot per new subscriber)

Every message is msgspec msgpack (core/engine/wire.py). Reads poll with a short timeout and check
that the child is alive, so a dead EngineCore raises EngineDeadError within a fraction of a second
instead of hanging. The child is ended on every path: shutdown(), garbage collection and
interpreter exit (weakref.finalize), and the child's own parent watchdog if this process dies.
"""

import asyncio
import itertools
import logging
import multiprocessing
import os
import shutil
import tempfile
import threading
import time
import weakref
from collections import deque
from collections.abc import AsyncIterator

import msgspec
import zmq
import zmq.asyncio

from core.config import EngineConfig
from core.engine import wire
from core.engine.core_proc import EngineAddresses, run_engine_core
from core.engine.errors import EngineDeadError, EngineStartupError
from core.engine.events import MissedEvents, StepEvent, decode_event
from core.engine.processor import EngineInfo
from core.outputs import EngineCoreOutputs, EngineCoreRequest

__all__ = ["AsyncMPClient", "EngineDeadError", "EngineProcess", "EngineStartupError", "SyncMPClient"]

log = logging.getLogger("enginetui.mp_client")

POLL_MS = 100  # longest a blocking read waits before checking that the child is alive
STARTUP_TIMEOUT_ENV = "ENGINETUI_STARTUP_TIMEOUT"  # seconds to wait for READY (default 600)
SHUTDOWN_TIMEOUT_S = 5.0  # how long a clean shutdown may take before terminate / kill
SUB_RCVHWM = 64  # events a subscriber buffers before the publisher starts dropping


class EngineProcess:
    """The EngineCore child: spawn, handshake, liveness and the sockets bound for it.

    Takes over `ctx`: a failed start-up destroys it, and so does shutdown_engine().
    """

    def __init__(self, config: EngineConfig, ctx: zmq.Context, startup_timeout: float | None = None,
                 target=run_engine_core, log_file: str | None = None) -> None:
        self.ctx = ctx  # zmq context of the client
        self.tmpdir = tempfile.mkdtemp(prefix="enginetui-")  # holds the ipc socket files
        self.addresses = EngineAddresses(
            input=f"ipc://{self.tmpdir}/input", output=f"ipc://{self.tmpdir}/output", events=f"ipc://{self.tmpdir}/events"
        )
        self.in_sock = ctx.socket(zmq.PUSH)  # requests and control to the child
        self.in_sock.setsockopt(zmq.LINGER, 0)
        self.in_sock.bind(self.addresses.input)
        self.out_sock = ctx.socket(zmq.PULL)  # outputs and replies from the child
        self.out_sock.setsockopt(zmq.LINGER, 0)
        self.out_sock.bind(self.addresses.output)
        self.sockets: list = [self.in_sock, self.out_sock]  # closed at shutdown
        self.dead: EngineDeadError | None = None  # set once the child is known dead or shut down
        self.closed = False  # shut down on purpose
        spawn = multiprocessing.get_context("spawn")
        on_main_thread = threading.current_thread() is threading.main_thread()
        self.proc = spawn.Process(  # daemon: multiprocessing also ends it at interpreter exit
            target=target, name="EngineCore", daemon=True,
            # PDEATHSIG fires when the *thread* that forked exits: only safe from the main thread
            args=(msgspec.msgpack.encode(config), tuple(self.addresses), os.getpid(), on_main_thread),
            kwargs={"log_file": os.path.abspath(log_file)} if log_file else {},  # the child's output goes there
        )
        try:
            self.proc.start()
            self.pid: int = self.proc.pid  # EngineCore's process id
            self.info: EngineInfo = self._handshake(_startup_timeout(startup_timeout))  # from READY
        except BaseException:
            shutdown_engine(self.proc, self.in_sock, self.sockets, self.ctx, self.tmpdir, timeout=1.0)
            raise

    def _handshake(self, timeout: float) -> EngineInfo:
        deadline = time.monotonic() + timeout
        while True:
            if self.out_sock.poll(POLL_MS):
                msg = wire.decode_output(self.out_sock.recv())
                if isinstance(msg, wire.Ready):
                    return msg.info
                if isinstance(msg, wire.StartupFailed):
                    self.proc.join(timeout=5.0)
                    raise EngineStartupError(f"EngineCore failed to start: {msg.error}")
                raise EngineStartupError(f"EngineCore sent {type(msg).__name__} before READY")
            if not self.proc.is_alive():
                if self.out_sock.poll(0):
                    continue  # it said something before exiting: read that first
                raise EngineStartupError(
                    f"EngineCore process (pid {self.proc.pid}) exited with code {self.proc.exitcode} before it was ready"
                )
            if time.monotonic() > deadline:
                raise EngineStartupError(
                    f"EngineCore process (pid {self.proc.pid}) did not become ready within {timeout:.0f} s "
                    f"(set {STARTUP_TIMEOUT_ENV} to wait longer)"
                )

    def check(self) -> None:
        """Raise EngineDeadError if the child is gone (or was shut down)."""
        if self.dead is not None:
            raise self.dead
        if not self.proc.is_alive():
            self.dead = EngineDeadError(
                f"EngineCore process (pid {self.pid}) died unexpectedly (exit code {self.proc.exitcode})"
            )
            raise self.dead

    def failed(self, error: str) -> EngineDeadError:
        """The error for an EngineFailed message (a step raised in the child)."""
        self.dead = EngineDeadError(f"EngineCore process (pid {self.pid}) failed and exited: {error}")
        return self.dead

    def send_nowait(self, msg: msgspec.Struct) -> bool:
        """Try to queue one input message without blocking; False if the socket is full / unconnected."""
        self.check()
        try:
            self.in_sock.send(wire.encode(msg), zmq.NOBLOCK)
        except zmq.Again:
            return False
        return True


def shutdown_engine(proc, in_sock, sockets, ctx, tmpdir, timeout: float = SHUTDOWN_TIMEOUT_S) -> None:
    """End the child (ask, wait, terminate, kill), close the sockets, remove the ipc files. Idempotent."""
    try:
        if proc.pid is not None and proc.is_alive():
            try:
                in_sock.send(wire.encode(wire.Shutdown()), zmq.NOBLOCK)
            except zmq.ZMQError:
                pass
            proc.join(timeout)
            if proc.is_alive():
                log.warning("EngineCore (pid %s) did not exit in %.0f s; terminating it", proc.pid, timeout)
                proc.terminate()
                proc.join(2.0)
            if proc.is_alive():
                proc.kill()
                proc.join(2.0)
    finally:
        for sock in list(sockets):
            try:
                sock.close(linger=0)
            except Exception:  # noqa: BLE001, S110 - closing at exit must not raise
                pass
        try:
            ctx.destroy(linger=0)
        except Exception:  # noqa: BLE001, S110
            pass
        shutil.rmtree(tmpdir, ignore_errors=True)


def _startup_timeout(timeout: float | None) -> float:
    if timeout is not None:
        return timeout
    return float(os.environ.get(STARTUP_TIMEOUT_ENV, "600"))


class _MPClientBase:
    """Start-up and shutdown shared by the sync and async clients."""

    def __init__(self, config: EngineConfig, startup_timeout: float | None = None, log_file: str | None = None) -> None:
        self.config = config  # engine configuration
        self.ctx = zmq.Context()  # this client's zmq context
        self.log_file = log_file  # where the child's stdout / stderr / logging go (None: inherited)
        self.engine = EngineProcess(config, self.ctx, startup_timeout, log_file=log_file)  # the child and its sockets
        self.info = self.engine.info  # limits and identity (info.pid is the child's)
        self.engine_pid = self.engine.pid  # EngineCore's process id
        self.events_address = self.engine.addresses.events  # where StepEvents are published
        e = self.engine
        self._finalizer = weakref.finalize(self, shutdown_engine, e.proc, e.in_sock, e.sockets, self.ctx, e.tmpdir)

    @property
    def is_alive(self) -> bool:
        return self.engine.dead is None and self.engine.proc.is_alive()

    def shutdown(self) -> None:
        """End the child and free the sockets. Idempotent."""
        self.engine.closed = True
        if self.engine.dead is None:
            self.engine.dead = EngineDeadError("EngineCore was shut down")
        self._finalizer()


class SyncMPClient(_MPClientBase):
    """Blocking client, same interface as InprocClient; LLMEngine uses it by default."""

    def __init__(self, config: EngineConfig, startup_timeout: float | None = None, log_file: str | None = None) -> None:
        super().__init__(config, startup_timeout, log_file)
        self._outputs: deque[EngineCoreOutputs] = deque()  # outputs that arrived during control calls
        self._call_ids = itertools.count(1)  # control call ids

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

    def pause(self) -> None:
        self._call("pause")

    def resume(self) -> None:
        self._call("resume")

    def step_once(self) -> EngineCoreOutputs:
        """Exactly one engine step; returns its outputs."""
        reply, during = self._call("step")
        mine = [o for o in during if o.step == reply.step]
        self._outputs.extend(o for o in during if o.step != reply.step)
        return EngineCoreOutputs(outputs=[x for o in mine for x in o.outputs], step=reply.step, timestamp=time.time())

    def snapshot(self) -> StepEvent:
        reply, _ = self._call("snapshot")
        return reply.snapshot

    def reset_prefix_cache(self) -> None:
        self._call("reset_prefix_cache")

    # ---- plumbing --------------------------------------------------------------------------

    def _send(self, msg: msgspec.Struct) -> None:
        while not self.engine.send_nowait(msg):
            self.engine.in_sock.poll(POLL_MS, zmq.POLLOUT)

    def _recv(self) -> wire.OutputMessage:
        sock = self.engine.out_sock
        while True:
            if self.engine.dead is not None:
                raise self.engine.dead
            if sock.poll(POLL_MS):
                msg = wire.decode_output(sock.recv())
                if isinstance(msg, wire.EngineFailed):
                    raise self.engine.failed(msg.error)
                return msg
            if not self.engine.proc.is_alive() and sock.poll(0):
                continue  # read what it sent before dying first
            self.engine.check()

    def _call(self, op: str) -> tuple[wire.ControlReply, list[EngineCoreOutputs]]:
        """A control call; returns the reply and the outputs that arrived before it (in order)."""
        call_id = next(self._call_ids)
        self._send(wire.Control(call_id=call_id, op=op))
        during: list[EngineCoreOutputs] = []
        while True:
            msg = self._recv()
            if isinstance(msg, wire.Outputs):
                during.append(msg.outputs)
            elif isinstance(msg, wire.ControlReply) and msg.call_id == call_id:
                if op != "step":
                    self._outputs.extend(during)
                if msg.error:
                    raise RuntimeError(f"EngineCore {op} failed: {msg.error}")
                return msg, during


class AsyncMPClient(_MPClientBase):
    """asyncio client (zmq.asyncio). `get_output()` must be awaited continuously by one task
    (AsyncLLM's output handler): it also resolves control calls."""

    def __init__(self, config: EngineConfig, startup_timeout: float | None = None, log_file: str | None = None) -> None:
        super().__init__(config, startup_timeout, log_file)
        self._out = zmq.asyncio.Socket.from_socket(self.engine.out_sock)  # async view of the output socket
        socks = self.engine.sockets  # close the async view (it clears its event-loop reader), not the sync one
        socks[socks.index(self.engine.out_sock)] = self._out
        self._calls: dict[int, asyncio.Future] = {}  # control calls awaiting their reply
        self._call_ids = itertools.count(1)  # control call ids

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

    async def control(self, op: str, value: float = 0.0) -> wire.ControlReply:
        """Send a control call and wait for its reply (delivered through get_output())."""
        self.engine.check()
        call_id = next(self._call_ids)
        fut = asyncio.get_running_loop().create_future()
        self._calls[call_id] = fut
        try:
            await self._send(wire.Control(call_id=call_id, op=op, value=value))
            return await fut
        finally:
            self._calls.pop(call_id, None)

    async def events(self, conflate: bool = False) -> AsyncIterator[StepEvent]:
        """Live step events; the first one is a snapshot sent because this subscriber joined.
        Ends when the client is shut down; raises EngineDeadError if the child dies."""
        self.engine.check()
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
        try:
            while True:
                if await sock.poll(POLL_MS):
                    event = decode_event(await sock.recv())
                    yield event if missed is None else missed.mark(event)
                    continue
                if self.engine.closed:
                    return  # shut down: the stream ends
                self.engine.check()
        finally:
            sock.close(linger=0)
            ctx.term()

    def shutdown(self) -> None:
        self._fail_calls(EngineDeadError("EngineCore was shut down"))
        super().shutdown()

    # ---- plumbing --------------------------------------------------------------------------

    async def _send(self, msg: msgspec.Struct) -> None:
        while not self.engine.send_nowait(msg):
            await asyncio.sleep(0.005)

    async def _recv(self) -> wire.OutputMessage:
        sock = self._out
        while True:
            if self.engine.dead is not None:
                raise self.engine.dead
            if await sock.poll(POLL_MS):
                msg = wire.decode_output(await sock.recv())
                if isinstance(msg, wire.EngineFailed):
                    raise self.engine.failed(msg.error)
                return msg
            if not self.engine.proc.is_alive() and self.engine.out_sock.poll(0):
                continue
            self.engine.check()

    def _fail_calls(self, exc: BaseException) -> None:
        calls, self._calls = self._calls, {}
        for fut in calls.values():
            if not fut.done():
                try:
                    fut.set_exception(exc)
                except RuntimeError:  # its loop is closed
                    pass
