"""AsyncInprocClient: EngineCore in this process, driven by a background asyncio task.

The debugging twin of AsyncMPClient (same interface): steps run in a worker thread
(asyncio.to_thread) so the event loop stays responsive, under a lock that every other access
to EngineCore also takes. Step events fan out to per-subscriber queues; a full queue drops the
event for that subscriber alone, which counts the gap, as with the PUB socket.
"""

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator

from core.config import EngineConfig
from core.engine import wire
from core.engine.core import EngineCore
from core.engine.core_client import engine_info
from core.engine.errors import EngineDeadError
from core.engine.events import MissedEvents, StepEvent
from core.outputs import EngineCoreOutputs, EngineCoreRequest

SUB_QUEUE_SIZE = 64  # events a subscriber may fall behind before they are dropped for it


class AsyncInprocClient:
    """Runs EngineCore in this process; `get_output()` is fed by a background stepping task."""

    def __init__(self, config: EngineConfig) -> None:
        self.config = config  # engine configuration
        self.core: EngineCore | None = EngineCore(config)  # the engine (None after shutdown)
        self.info = engine_info(self.core, os.getpid())  # limits and identity
        self.engine_pid: int | None = None  # no child process
        self._outputs: asyncio.Queue | None = None  # EngineCoreOutputs (or an exception) for get_output()
        self._lock: asyncio.Lock | None = None  # serializes every use of the core
        self._wake: asyncio.Event | None = None  # set when there may be new work
        self._task: asyncio.Task | None = None  # the stepping task
        self._subscribers: list[asyncio.Queue] = []  # events() queues
        self._dead: EngineDeadError | None = None  # set when a step failed or after shutdown
        self._closed = False  # shut down on purpose
        self._last_step_at = float("-inf")  # time.monotonic() at the last step's start (for slow motion)

    # ---- the client interface --------------------------------------------------------------

    async def add_request(self, request: EngineCoreRequest) -> None:
        core = self._core()
        async with self._lock:
            try:
                core.add_request(request)
            except Exception as exc:  # noqa: BLE001 - a bad request fails alone
                core.scheduler.report_error(request.request_id, wire.describe(exc))
        self._wake.set()

    async def abort_requests(self, request_ids: list[str]) -> None:
        core = self._core()
        async with self._lock:
            core.abort_requests(list(request_ids))
        self._wake.set()

    async def get_output(self) -> EngineCoreOutputs:
        self._core()
        item = await self._outputs.get()
        if isinstance(item, BaseException):
            self._outputs.put_nowait(item)  # every later call fails the same way
            raise item
        return item

    async def control(self, op: str, value: float = 0.0) -> wire.ControlReply:
        core = self._core()
        reply = wire.ControlReply(call_id=0, step=0)
        async with self._lock:
            if op == "step":
                await self._step()  # a failing step is fatal, as in the busy loop
            else:
                try:
                    if op == "pause":
                        core.paused = True
                    elif op == "resume":
                        core.paused = False
                    elif op == "snapshot":
                        reply.snapshot = core.snapshot()
                    elif op == "reset_prefix_cache":
                        core.reset_prefix_cache()
                    elif op == "set_step_interval":
                        core.set_step_interval(value)
                    else:
                        raise ValueError(f"unknown control op {op!r}")
                except Exception as exc:  # noqa: BLE001 - the caller gets the error, the engine lives on
                    reply.error = wire.describe(exc)
            reply.step = core.step_count
        self._wake.set()
        return reply

    async def events(self, conflate: bool = False) -> AsyncIterator[StepEvent]:
        """Live step events, starting with a snapshot (like a new PUB subscriber gets)."""
        core = self._core()
        queue: asyncio.Queue = asyncio.Queue(maxsize=1 if conflate else SUB_QUEUE_SIZE)
        self._subscribers.append(queue)
        missed = None if conflate else MissedEvents()  # conflating skips events on purpose
        try:
            if self.config.enable_step_events:
                async with self._lock:
                    queue.put_nowait(core.snapshot())
            while True:
                item = await queue.get()
                if item is None:
                    return  # shut down
                if isinstance(item, BaseException):
                    raise item
                yield item if missed is None else missed.mark(item)
        finally:
            if queue in self._subscribers:
                self._subscribers.remove(queue)

    @property
    def is_alive(self) -> bool:
        return self._dead is None

    def shutdown(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._dead is None:
            self._dead = EngineDeadError("EngineCore was shut down")
        if self._task is not None and not self._task.done():
            try:
                self._task.cancel()
            except RuntimeError:  # its loop is closed
                pass
        for queue in self._subscribers:
            _put_latest(queue, None)
        self.core = None

    # ---- the stepping task -----------------------------------------------------------------

    def _core(self) -> EngineCore:
        if self._dead is not None:
            raise self._dead
        if self._task is None:
            self._outputs = asyncio.Queue()
            self._lock = asyncio.Lock()
            self._wake = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._drive(), name="enginetui-inproc-engine")
        return self.core

    async def _drive(self) -> None:
        core = self.core
        try:
            while True:
                wait = self._last_step_at + core.step_interval_s - time.monotonic()
                if core.paused or not core.has_work() or wait > 0:
                    if core.scheduler.has_pending_outputs():  # aborts / rejections while paused or held back
                        outs = core.scheduler.take_pending_outputs()
                        self._outputs.put_nowait(EngineCoreOutputs(outputs=outs, step=core.step_count, timestamp=time.time()))
                    self._wake.clear()
                    if core.paused or not core.has_work():
                        await self._wake.wait()
                        self._last_step_at = float("-inf")  # slow motion spaces busy steps; new work starts at once
                    else:  # slow motion: until the step is due, or a request or control comes
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(self._wake.wait(), wait)
                    continue
                async with self._lock:
                    if not core.paused and core.has_work():
                        self._last_step_at = time.monotonic()
                        await self._step()
                await asyncio.sleep(0)  # let requests and controls in between steps
        except Exception as exc:  # noqa: BLE001 - a failed step ends the engine, like a dead child
            self._dead = EngineDeadError(f"EngineCore failed: {wire.describe(exc)}")
            self._outputs.put_nowait(self._dead)
            for queue in self._subscribers:
                _put_latest(queue, self._dead)

    async def _step(self) -> None:
        outputs, event = await asyncio.to_thread(self.core.step)
        if outputs.outputs:
            self._outputs.put_nowait(outputs)
        if event is not None:
            self._publish(event)

    def _publish(self, event: StepEvent) -> None:
        """Hand the event to every subscriber; a full queue loses it (its reader counts the gap)."""
        for queue in self._subscribers:
            try:
                queue.put_nowait(event)
            except asyncio.QueueFull:
                if queue.maxsize == 1:  # conflating subscriber: keep the newest
                    _put_latest(queue, event)


def _put_latest(queue: asyncio.Queue, item) -> None:
    """Put, discarding the oldest entry if the queue is full."""
    while True:
        try:
            queue.put_nowait(item)
            return
        except asyncio.QueueFull:
            try:
                queue.get_nowait()
            except asyncio.QueueEmpty:
                pass
