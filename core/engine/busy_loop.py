"""The busy loop around one EngineCore, and its IO threads: the same code in a child process
(core/engine/core_proc.py) and on a thread of the caller (in-process mode).

The client binds the input and output sockets; `serve` connects to them, binds the event PUB
socket, builds EngineCore and answers the handshake (Ready, or StartupFailed); then three threads
share the work, so socket work and (de)serialization overlap the model's forward pass:

- input thread:  PULL socket -> decode -> `in_q`
- loop thread:   drain `in_q` (add / abort / control), step(), put results on `out_q`; blocks on
                 `in_q` while there is nothing to step, so an idle engine uses no CPU
- output thread: `out_q` -> encode -> PUSH socket (outputs, control replies) or PUB (events)

No thread wakes on a timer (every wake stalls a step on a machine the model's threads fill). A step
publishes its event; whatever happens between steps publishes one "update" event once the loop is idle.
"""

import logging
import queue
import threading
import time
from collections.abc import Callable

import msgspec
import zmq

from enginetui.core.config import EngineConfig
from enginetui.core.engine import control, wire
from enginetui.core.engine.core import EngineCore
from enginetui.core.engine.event_publisher import EventPublisher
from enginetui.core.engine.events import StepEvent
from enginetui.core.engine.wake_queue import WakeQueue
from enginetui.core.outputs import EngineCoreOutput, EngineCoreOutputs
from enginetui.core.worker.thread_governor import ThreadGovernor

log = logging.getLogger("enginetui.busy_loop")


class _SubscriberJoined:
    """Internal in_q message: the output thread saw a new subscriber; greet it with a snapshot."""


class _BadMessage(msgspec.Struct):
    """Internal in_q message: an input that did not decode; fail its request if it names one."""

    request_id: str | None  # the request it carried, if any
    error: str  # why it did not decode


_SUBSCRIBER_JOINED = _SubscriberJoined()
_STOP = object()  # out_q sentinel: the output thread exits after sending everything before it


def serve(
    config: EngineConfig,
    addresses: wire.EngineAddresses,
    pid: int,
    on_core: Callable[[EngineCore], None] | None = None,
    on_startup_error: Callable[[BaseException], None] | None = None,
    governor: ThreadGovernor | None = None,
) -> int:
    """Build EngineCore, answer the handshake and run the busy loop until Shutdown.

    `on_core` receives the EngineCore once built, `on_startup_error` the exception if building it
    failed (the in-process host keeps both, for debugging). `governor` (the EngineCore child's, on
    CPU) adapts the compute thread count after each step.
    Returns the exit code: 0 after a Shutdown, 1 if start-up or a step failed (the client was told why).
    """
    ctx = zmq.Context()
    out_sock = ctx.socket(zmq.PUSH)
    out_sock.connect(addresses.output)
    try:
        core = EngineCore(config)
        loop = EngineLoop(core, ctx, out_sock, addresses, governor)
        ready = wire.encode(wire.Ready(info=core.describe(pid)))
        if on_core is not None:
            on_core(core)
    except BaseException as exc:  # every failure must reach the client
        log.debug("EngineCore startup failed", exc_info=True)
        if on_startup_error is not None:
            on_startup_error(exc)
        out_sock.send(wire.encode(wire.StartupFailed(error=wire.describe(exc))))
        out_sock.close(linger=2000)
        ctx.term()
        return 1
    out_sock.send(ready)
    return loop.run()


class EngineLoop:
    """The busy loop around one EngineCore, with its IO threads."""

    def __init__(
        self,
        core: EngineCore,
        ctx: zmq.Context,
        out_sock: zmq.Socket,
        addresses: wire.EngineAddresses,
        governor: ThreadGovernor | None = None,
    ) -> None:
        self.core = core  # the engine
        self.governor = governor  # adapts the CPU thread count after each step (None: fixed)
        self.ctx = ctx  # this loop's zmq context
        self.out_sock = out_sock  # PUSH to the client (owned by the output thread once running)
        self.in_sock = ctx.socket(zmq.PULL)  # from the client (owned by the input thread)
        self.in_sock.connect(addresses.input)
        self.events_on = core.config.enable_step_events  # False: no events built or sent at all
        self.publisher = EventPublisher(ctx, addresses.events) if self.events_on else None  # step events
        self.in_q: queue.Queue = queue.Queue()  # decoded input messages, in arrival order
        self.out_q = WakeQueue(ctx)  # wire messages and StepEvents to send, in order (loop -> output thread)
        self._stop = WakeQueue(ctx)  # an item here tells the input thread to exit (loop -> input thread)
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
        self.core.close()
        self._stop.put(_STOP)
        self.out_q.put(_STOP)
        for t in self._threads:
            t.join(timeout=3.0)
        if any(t.is_alive() for t in self._threads):
            return code  # a thread is stuck in a socket call: leave the sockets to process exit
        self.in_sock.close(linger=0)
        self.out_sock.close(linger=1000)
        self.out_q.close()
        self._stop.close()
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
                self._publish_update()  # e.g. aborts, adds or controls while paused
                if self._handle(self.in_q.get()):  # idle: sleep until a message arrives
                    return
                last_step_at = float("-inf")  # slow motion spaces busy steps; new work starts at once
                if self.governor is not None:
                    self.governor.idle()
            while True:
                try:
                    msg = self.in_q.get_nowait()
                except queue.Empty:
                    break
                if self._handle(msg):
                    return
            if core.paused or not core.has_work():
                continue
            wait = last_step_at + core.step_interval_s - time.monotonic()
            if wait > 0:  # slow motion: publish what changed, serve inputs until the step is due
                self._publish_update()
                try:
                    msg = self.in_q.get(timeout=wait)
                except queue.Empty:
                    continue
                if self._handle(msg):
                    return
                continue
            last_step_at = time.monotonic()
            self.step()

    def _publish_update(self) -> None:
        """Send outputs produced between steps and an event for whatever changed since the latest one."""
        outputs, event = self.core.take_update()
        self._send_outputs(outputs)
        if event is not None:
            self.out_q.put(event)

    def _send_outputs(self, outputs: list[EngineCoreOutput]) -> None:
        if outputs:
            core = self.core
            self.out_q.put(
                wire.Outputs(outputs=EngineCoreOutputs(outputs=outputs, step=core.step_count, timestamp=time.time()))
            )

    def _handle(self, msg) -> bool:
        """Apply one input message; True means shut down."""
        core = self.core
        if isinstance(msg, wire.AddRequest):
            try:
                core.add_request(msg.request)
            except Exception as exc:  # noqa: BLE001 - a bad request fails alone, the engine lives on
                core.report_error(msg.request.request_id, wire.describe(exc))
        elif isinstance(msg, wire.AbortRequests):
            core.abort_requests(msg.request_ids)
        elif isinstance(msg, wire.Control):
            self._control(msg)
        elif isinstance(msg, wire.Shutdown):
            return True
        elif msg is _SUBSCRIBER_JOINED:
            if self.events_on:
                self.out_q.put(core.publishable_snapshot())
        elif isinstance(msg, _BadMessage):
            log.error("undecodable input message: %s", msg.error)
            if msg.request_id is not None:
                core.report_error(msg.request_id, f"request could not be decoded: {msg.error}")
        return False

    def _control(self, msg: wire.Control) -> None:
        reply = wire.ControlReply(call_id=msg.call_id, step=0)
        try:
            reply.result = control.apply(self, msg.op, msg.value)
        except control.ControlFailed as exc:  # a bad call: the caller gets the error, the engine lives on
            reply.error = exc.error
        self._publish_update()  # what the call changed reaches subscribers before its reply returns
        reply.step = self.core.step_count
        self.out_q.put(reply)

    # ---- control operations (core.engine.control dispatches to these) ------------------------

    def pause(self) -> None:
        self.core.set_paused(True)

    def resume(self) -> None:
        self.core.set_paused(False)

    def step(self) -> None:
        """One engine step; its outputs and event go out. A failing step is fatal (it propagates
        out of the busy loop: EngineCore is broken)."""
        outputs, event = self.core.step()
        if self.governor is not None:
            self.governor.after_step()
        if outputs.outputs or outputs.num_scheduled_tokens:
            self.out_q.put(wire.Outputs(outputs=outputs))
        if event is not None:
            self.out_q.put(event)

    def snapshot(self) -> StepEvent:
        return self.core.snapshot()

    def reset_prefix_cache(self) -> bool:
        return self.core.reset_prefix_cache()

    def set_step_interval(self, seconds: float) -> None:
        self.core.set_step_interval(seconds)

    # ---- IO threads --------------------------------------------------------------------------

    def _input_loop(self) -> None:
        sock = self.in_sock
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        poller.register(self._stop.socket, zmq.POLLIN)
        while True:
            if self._stop.socket in dict(poller.poll()):
                return
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
        poller = zmq.Poller()
        poller.register(self.out_q.socket, zmq.POLLIN)
        if publisher is not None:  # readable when a subscriber joins
            poller.register(publisher.sock, zmq.POLLIN)
        while True:
            ready = dict(poller.poll())
            for item in self.out_q.drain():
                if item is _STOP:
                    return
                if isinstance(item, StepEvent):
                    if publisher is not None:
                        publisher.publish(item)
                else:
                    self.out_sock.send(wire.encode(item))
            if publisher is not None and publisher.sock in ready and publisher.new_subscribers():
                self.in_q.put(_SUBSCRIBER_JOINED)


def _request_id_of(data: bytes) -> str | None:
    """Best effort: the request id inside an AddRequest that failed to decode."""
    try:
        raw = msgspec.msgpack.decode(data)
        rid = raw["request"]["request_id"] if raw.get("type") == "add" else None
        return rid if isinstance(rid, str) else None
    except Exception:  # noqa: BLE001
        return None
