"""EngineCore in its own process: the busy loop, its IO threads and the parent watchdog.

The client (mp_client.py) binds the input and output sockets, then spawns this process with
their addresses. The child connects, binds the step-event PUB socket, builds EngineCore and
answers the handshake (Ready, or StartupFailed and exit). Then three threads share the work:

- input thread:  PULL socket -> decode -> `in_q`
- main thread:   the busy loop: drain `in_q` (add / abort / control), step(), put results on `out_q`;
                 blocks on `in_q` while there is nothing to step, so an idle engine uses no CPU
- output thread: `out_q` -> encode -> PUSH socket (outputs, control replies) or PUB (step events)

so socket work and (de)serialization overlap the model's forward pass. A watchdog thread exits
the process as soon as the parent is gone (plus PR_SET_PDEATHSIG on Linux, best effort).
"""

import contextlib
import ctypes
import logging
import os
import queue
import signal
import sys
import threading
import time
from typing import NamedTuple

import msgspec
import zmq

from core.config import EngineConfig
from core.engine import wire
from core.engine.core import EngineCore
from core.engine.core_client import engine_info
from core.engine.event_publisher import EventPublisher
from core.engine.events import StepEvent
from core.outputs import EngineCoreOutput, EngineCoreOutputs

log = logging.getLogger("enginetui.core_proc")

WATCHDOG_INTERVAL_S = 0.25  # how often the child checks that its parent is alive
INPUT_POLL_MS = 200  # input thread wakes this often to notice a stop
OUTPUT_POLL_S = 0.1  # output thread wakes this often to notice new subscribers


class EngineAddresses(NamedTuple):
    """The three sockets between a client and its EngineCore process (ipc:// paths)."""

    input: str  # client PUSH (bound) -> EngineCore PULL: AddRequest / AbortRequests / Control / Shutdown
    output: str  # EngineCore PUSH -> client PULL (bound): Ready / Outputs / ControlReply / ...
    events: str  # EngineCore XPUB (bound) -> any number of SUB: StepEvent


class _SubscriberJoined:
    """Internal in_q message: the output thread saw a new subscriber; greet it with a snapshot."""


class _BadMessage(msgspec.Struct):
    """Internal in_q message: an input that did not decode; fail its request if it names one."""

    request_id: str | None  # the request it carried, if any
    error: str  # why it did not decode


_SUBSCRIBER_JOINED = _SubscriberJoined()
_STOP = object()  # out_q sentinel: the output thread exits after sending everything before it


def run_engine_core(config_bytes: bytes, addresses: tuple[str, str, str], parent_pid: int, set_pdeathsig: bool,
                    log_file: str | None = None) -> None:
    """The child process's entry point (multiprocessing spawn target); arguments are plain data.

    With `log_file`, everything this process prints (stdout, stderr, logging, warnings) is
    appended to that file instead of the parent's terminal.
    """
    if log_file is not None:
        _redirect_output(log_file)
    addresses = EngineAddresses(*addresses)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the whole group; the parent decides
    signal.signal(signal.SIGTERM, lambda *_: _exit_now(addresses))  # terminate(), or the parent died
    if set_pdeathsig:
        _set_pdeathsig()
    if os.getppid() != parent_pid:
        os._exit(1)  # the parent died while we were starting
    threading.Thread(target=_watch_parent, args=(parent_pid, addresses), name="parent-watchdog", daemon=True).start()

    ctx = zmq.Context()
    out_sock = ctx.socket(zmq.PUSH)
    out_sock.connect(addresses.output)
    try:
        config = msgspec.msgpack.decode(config_bytes, type=EngineConfig)
        core = EngineCore(config)
        proc = EngineCoreProc(core, ctx, out_sock, addresses)
    except BaseException as exc:  # every failure must reach the client
        log.debug("EngineCore startup failed", exc_info=True)
        out_sock.send(wire.encode(wire.StartupFailed(error=wire.describe(exc))))
        out_sock.close(linger=2000)
        ctx.term()
        _exit(1)
    out_sock.send(wire.encode(wire.Ready(info=engine_info(core, os.getpid()))))
    code = proc.run()
    log.info("EngineCore exiting (code %d)", code)
    _exit(code)


def _redirect_output(log_file: str) -> None:
    """Point file descriptors 1 and 2 (Python, C and Rust writers alike) at `log_file`, appended,
    and send logging and warnings there too, stamped with this process's id."""
    os.makedirs(os.path.dirname(os.path.abspath(log_file)), exist_ok=True)
    fd = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    for stream, target in ((sys.stdout, 1), (sys.stderr, 2)):
        if stream is not None:
            stream.flush()
        os.dup2(fd, target)
    os.close(fd)
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.reconfigure(line_buffering=True)  # was decided for a terminal; keep lines whole
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, force=True,
                        format="%(asctime)s EngineCore[%(process)d] %(levelname)s %(name)s: %(message)s")
    logging.captureWarnings(True)
    log.info("EngineCore starting (parent pid %d); its output goes to %s", os.getppid(), log_file)


def _exit(code: int) -> None:
    """Sockets are flushed and closed: skip interpreter teardown (slow with torch loaded, and
    nothing is left to clean up)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class EngineCoreProc:
    """The busy loop around one EngineCore, with its IO threads."""

    def __init__(self, core: EngineCore, ctx: zmq.Context, out_sock: zmq.Socket, addresses: EngineAddresses) -> None:
        self.core = core  # the engine
        self.ctx = ctx  # zmq context of this process
        self.out_sock = out_sock  # PUSH to the client (owned by the output thread once running)
        self.in_sock = ctx.socket(zmq.PULL)  # from the client (owned by the input thread)
        self.in_sock.connect(addresses.input)
        self.events_on = core.config.enable_step_events  # False: no events built or sent at all
        self.publisher = EventPublisher(ctx, addresses.events) if self.events_on else None  # step events
        self.in_q: queue.Queue = queue.Queue()  # decoded input messages, in arrival order
        self.out_q: queue.Queue = queue.Queue()  # wire messages and StepEvents to send, in order
        self._stop = threading.Event()  # tells the input thread to exit
        self._threads = [
            threading.Thread(target=self._input_loop, name="engine-input", daemon=True),
            threading.Thread(target=self._output_loop, name="engine-output", daemon=True),
        ]

    # ---- lifecycle -------------------------------------------------------------------------

    def run(self) -> int:
        """Serve until a Shutdown message (exit code 0) or a failed step (exit code 1)."""
        for t in self._threads:
            t.start()
        code = 0
        try:
            self._busy_loop()
        except Exception as exc:  # a broken engine tells the client why, then exits
            log.exception("EngineCore step failed")
            self.out_q.put(wire.EngineFailed(error=wire.describe(exc)))
            code = 1
        self._stop.set()
        self.out_q.put(_STOP)
        for t in self._threads:
            t.join(timeout=3.0)
        if any(t.is_alive() for t in self._threads):
            return code  # a thread is stuck in a socket call: leave the sockets to process exit
        self.in_sock.close(linger=0)
        self.out_sock.close(linger=1000)
        if self.publisher is not None:
            self.publisher.close()
        self.ctx.term()
        return code

    # ---- the busy loop -----------------------------------------------------------------------

    def _busy_loop(self) -> None:
        core = self.core
        last_step_at = float("-inf")  # time.monotonic() at the last step's start (for slow motion)
        while True:
            if core.paused or not core.has_work():
                if core.scheduler.has_pending_outputs():  # aborts / rejections while paused
                    self._send_outputs(core.scheduler.take_pending_outputs())
                if self._handle(self.in_q.get()):  # idle: sleep until a message arrives
                    return
                last_step_at = float("-inf")  # slow motion spaces busy steps; new work starts at once
            while True:
                try:
                    msg = self.in_q.get_nowait()
                except queue.Empty:
                    break
                if self._handle(msg):
                    return
            if not core.paused and core.has_work():
                wait = last_step_at + core.step_interval_s - time.monotonic()
                if wait > 0:  # slow motion: deliver what is ready, serve inputs until the step is due
                    if core.scheduler.has_pending_outputs():  # e.g. an abort while the step is held back
                        self._send_outputs(core.scheduler.take_pending_outputs())
                    try:
                        msg = self.in_q.get(timeout=wait)
                    except queue.Empty:
                        continue
                    if self._handle(msg):
                        return
                    continue
                last_step_at = time.monotonic()
                self._step()

    def _step(self) -> None:
        outputs, event = self.core.step()
        if outputs.outputs:
            self.out_q.put(wire.Outputs(outputs=outputs))
        if event is not None:
            self.out_q.put(event)

    def _send_outputs(self, outputs: list[EngineCoreOutput]) -> None:
        core = self.core
        self.out_q.put(wire.Outputs(outputs=EngineCoreOutputs(outputs=outputs, step=core.step_count, timestamp=time.time())))

    def _handle(self, msg) -> bool:
        """Apply one input message; True means shut down."""
        core = self.core
        if isinstance(msg, wire.AddRequest):
            try:
                core.add_request(msg.request)
            except Exception as exc:  # noqa: BLE001 - a bad request fails alone, the engine lives on
                self._fail_request(msg.request.request_id, wire.describe(exc))
        elif isinstance(msg, wire.AbortRequests):
            core.abort_requests(msg.request_ids)
        elif isinstance(msg, wire.Control):
            self._control(msg)
        elif isinstance(msg, wire.Shutdown):
            return True
        elif msg is _SUBSCRIBER_JOINED:
            if self.events_on:
                self.out_q.put(core.snapshot())
        elif isinstance(msg, _BadMessage):
            log.error("undecodable input message: %s", msg.error)
            if msg.request_id is not None:
                self._fail_request(msg.request_id, f"request could not be decoded: {msg.error}")
        return False

    def _fail_request(self, request_id: str, error: str) -> None:
        self.core.scheduler.report_error(request_id, error)

    def _control(self, msg: wire.Control) -> None:
        core = self.core
        reply = wire.ControlReply(call_id=msg.call_id, step=0)
        if msg.op == "step":
            self._step()  # a failing step is fatal: it propagates out of the busy loop
        else:
            try:
                if msg.op == "pause":
                    core.paused = True
                elif msg.op == "resume":
                    core.paused = False
                elif msg.op == "snapshot":
                    reply.snapshot = core.snapshot()
                elif msg.op == "reset_prefix_cache":
                    core.reset_prefix_cache()
                elif msg.op == "set_step_interval":
                    core.set_step_interval(msg.value)
                else:
                    raise ValueError(f"unknown control op {msg.op!r}; expected one of {', '.join(wire.CONTROL_OPS)}")
            except Exception as exc:  # noqa: BLE001 - the caller gets the error, the engine lives on
                reply.error = wire.describe(exc)
        reply.step = core.step_count
        self.out_q.put(reply)

    # ---- IO threads --------------------------------------------------------------------------

    def _input_loop(self) -> None:
        sock = self.in_sock
        while not self._stop.is_set():
            if not sock.poll(INPUT_POLL_MS):
                continue
            data = sock.recv()
            try:
                msg = wire.decode_input(data)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                msg = _BadMessage(request_id=_request_id_of(data), error=str(exc))
            self.in_q.put(msg)
            if isinstance(msg, wire.Shutdown):
                return

    def _output_loop(self) -> None:
        publisher = self.publisher
        while True:
            try:
                item = self.out_q.get(timeout=OUTPUT_POLL_S)
            except queue.Empty:
                item = None
            if item is _STOP:
                return
            if isinstance(item, StepEvent):
                if publisher is not None:
                    publisher.publish(item)
            elif item is not None:
                self.out_sock.send(wire.encode(item))
            if publisher is not None and publisher.new_subscribers():
                self.in_q.put(_SUBSCRIBER_JOINED)


def _request_id_of(data: bytes) -> str | None:
    """Best effort: the request id inside an AddRequest that failed to decode."""
    try:
        raw = msgspec.msgpack.decode(data)
        rid = raw["request"]["request_id"] if raw.get("type") == "add" else None
        return rid if isinstance(rid, str) else None
    except Exception:  # noqa: BLE001
        return None


def _watch_parent(parent_pid: int, addresses: EngineAddresses) -> None:
    """Exit as soon as the parent is gone (we get re-parented, so getppid() changes)."""
    while True:
        time.sleep(WATCHDOG_INTERVAL_S)
        if os.getppid() != parent_pid:
            _exit_now(addresses)


def _exit_now(addresses: EngineAddresses) -> None:
    """Leave at once, without the parent: remove the ipc files it can no longer remove."""
    _remove_ipc_files(addresses)
    os._exit(1)


def _remove_ipc_files(addresses: EngineAddresses) -> None:
    """Delete the ipc socket files and their directory (made by the client with mkdtemp)."""
    paths = [a.removeprefix("ipc://") for a in addresses if a.startswith("ipc://")]
    for path in paths:
        with contextlib.suppress(OSError):
            os.unlink(path)
    for folder in {os.path.dirname(p) for p in paths}:
        with contextlib.suppress(OSError):
            os.rmdir(folder)  # only if empty


def _set_pdeathsig() -> None:
    """Linux: have the kernel SIGTERM us when the parent (thread) exits. Best effort."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except Exception:  # noqa: BLE001, S110
        pass
