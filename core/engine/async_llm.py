"""AsyncLLM: the asyncio client-side engine the dashboard (and any server) drives.

    llm = AsyncLLM.from_engine_args(model=..., num_gpu_blocks_override=...)
    async for out in llm.generate("Once upon a time", SamplingParams(max_tokens=32), "r1"):
        print(out.new_text, end="")
    async for event in llm.events(): ...     # live StepEvents (first one is a snapshot)
    llm.start_recording("run.etrec")         # every event from now on, to a file (or record= above)
    await llm.stop_recording()
    llm.shutdown()

Requests are preprocessed here (Processor), sent to EngineCore (a child process by default, or
in-process with multiprocess=False / ENGINETUI_MULTIPROC=0), and one output-handler task reads
EngineCore's outputs, detokenizes them (OutputProcessor) and routes them to per-request queues.
"""

import asyncio
import logging
import os
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any, Self

from enginetui.core.config import EngineConfig
from enginetui.core.engine import wire
from enginetui.core.engine.control import OpMethods
from enginetui.core.engine.core_client import EngineCoreClient
from enginetui.core.engine.engine_info import EngineInfo
from enginetui.core.engine.errors import EngineDeadError, EngineStartupError
from enginetui.core.engine.events import StepEvent
from enginetui.core.engine.processor import PromptType
from enginetui.core.engine.tokenizer import open_text_stages
from enginetui.core.outputs import EngineCoreOutputs, RequestOutput
from enginetui.core.record.recorder import Recorder, RecordingSummary, start_recording
from enginetui.core.sampling_params import SamplingParams

__all__ = ["AsyncLLM", "EngineDeadError", "EngineStartupError"]

log = logging.getLogger("enginetui.async_llm")


class AsyncLLM(OpMethods):
    """Streams RequestOutputs per request and StepEvents per step; pause / step / resume control."""

    def __init__(
        self,
        config: EngineConfig,
        multiprocess: bool | None = None,
        log_file: str | None = None,
        record: str | os.PathLike | None = None,
    ) -> None:
        self.config = config  # engine configuration
        self.log_file = log_file  # EngineCore child's stdout / stderr / logging (None: this process's terminal)
        self.client = EngineCoreClient.make(config, asyncio_mode=True, multiprocess=multiprocess, log_file=log_file)
        self.info: EngineInfo = self.client.info  # limits and identity of the engine
        # The tokenizer (None on token ids only), tokenize + validate, detokenize + stop strings.
        # n > 1 requests stream each sample's progress as it happens.
        self.tokenizer, self.processor, self.output_processor = open_text_stages(config, self.client, stream=True)
        self._queues: dict[str, asyncio.Queue] = {}  # live request id -> its outputs (then maybe an error)
        self._handler: asyncio.Task | None = None  # the output-handler task
        self._background: set[asyncio.Task] = set()  # fire-and-forget aborts
        self._dead: EngineDeadError | None = None  # set when EngineCore died
        self._closed = False  # shutdown() was called
        # called with every EngineCoreOutputs as it arrives, before its requests' outputs go out (the
        # server's metrics: tokens per step, preemptions of each request that ended)
        self.output_observers: list[Callable[[EngineCoreOutputs], None]] = []
        self.recorder: Recorder | None = None  # writes the recording, while recording
        if record is not None:
            try:
                self.start_recording(record)
            except BaseException:
                self.client.shutdown()
                raise

    @classmethod
    def from_engine_args(
        cls,
        multiprocess: bool | None = None,
        log_file: str | None = None,
        record: str | os.PathLike | None = None,
        **engine_args,
    ) -> "AsyncLLM":
        """Build the config from vLLM-named arguments and start the engine (raises EngineStartupError).

        log_file: the EngineCore child process appends its stdout, stderr, logging and warnings
        there instead of writing to this process's terminal (ignored in-process).
        record: record every step event to that file from the start (see start_recording).
        """
        return cls(EngineConfig(**engine_args), multiprocess=multiprocess, log_file=log_file, record=record)

    # ---- identity --------------------------------------------------------------------------

    @property
    def engine_pid(self) -> int | None:
        """EngineCore's process id (None when it runs in this process)."""
        return self.client.engine_pid

    @property
    def model_name(self) -> str:
        return self.info.model_name

    @property
    def device(self) -> str:
        return self.info.device

    @property
    def is_running(self) -> bool:
        """False once EngineCore died (noticed here even while no request runs) or was shut down."""
        return self._dead is None and not self._closed and self.client.is_alive

    # ---- requests --------------------------------------------------------------------------

    async def generate(
        self, prompt: PromptType, params: SamplingParams | None, request_id: str, priority: int = 0
    ) -> AsyncGenerator[RequestOutput, None]:
        """Yield this request's RequestOutput after every step that advanced it; the last is finished.

        `prompt`: text, token ids, {"prompt": text} or {"prompt_token_ids": [...]}. With n > 1
        each output carries the one sample that advanced (CompletionOutput.index says which);
        the request is finished when all n are. Invalid input raises ValueError before anything
        reaches the engine. Leaving the loop early (break, or cancelling the consuming task)
        aborts the request. If EngineCore dies, a final output with finish_reason "error" is
        yielded, then EngineDeadError is raised.
        """
        self._check_usable()
        if request_id in self._queues or self.output_processor.is_live(request_id):
            raise ValueError(f"request id {request_id!r} is already in use")
        request, text = self.processor.process(request_id, prompt, params, priority)
        self._ensure_handler()
        queue: asyncio.Queue = asyncio.Queue()
        self._queues[request_id] = queue
        engine_requests = self.output_processor.register(request, text)
        try:
            for engine_request in engine_requests:
                await self.client.add_request(engine_request)
            while True:
                item = await queue.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
                if item.finished and queue.empty():
                    return
        finally:
            if self._queues.get(request_id) is queue:  # the caller left before the end: abort it
                del self._queues[request_id]
                engine_ids = self.output_processor.engine_ids(request_id)
                self.output_processor.forget(request_id)
                if self.is_running:
                    self._in_background(self.client.abort_requests(engine_ids))

    async def abort(self, request_id: str) -> None:
        """End a request; its generate() stream gets a final output with finish_reason "abort"."""
        if self.is_running:
            self._ensure_handler()
            await self.client.abort_requests(self.output_processor.engine_ids(request_id))

    # ---- control ---------------------------------------------------------------------------

    async def control(self, op: str, value: Any = None) -> Any:
        """Any control operation by name (core.engine.control.OPS); returns its result."""
        self._check_usable()
        self._ensure_handler()
        return await self.client.call(op, value)

    async def snapshot(self) -> StepEvent:
        """The full current state (an event of kind "snapshot")."""
        return await self.control("snapshot")

    def events(self, conflate: bool = False) -> AsyncIterator[StepEvent]:
        """Live step events; several subscribers may listen at once. The first event of each
        subscription is a snapshot (is_snapshot=True). A subscriber that falls behind loses events
        (counted in the next event's num_dropped_events); neither the engine nor the other
        subscribers wait for it.
        With conflate=True only the newest event is kept. Either way the stream ends level with the
        engine: a subscriber that lost the last events before a quiet spell is sent a snapshot of
        the current state. Raises EngineDeadError if EngineCore dies."""
        self._check_usable()
        return self.client.events(conflate=conflate, catch_up=self.snapshot)

    # ---- recording -------------------------------------------------------------------------

    def start_recording(self, path: str | os.PathLike, source: str = "AsyncLLM") -> Recorder:
        """Write every step event from now on to `path` (a recording: `enginetui replay PATH`).

        Returns once the recorder is subscribed (a moment). `source` names the recording program
        in the file. Raises RuntimeError while already recording.
        """
        self._check_usable()
        if self.recorder is not None:
            raise RuntimeError(f"already recording to {self.recorder.path}")
        self.recorder = start_recording(path, self.client, self.tokenizer, source)
        return self.recorder

    async def stop_recording(self) -> RecordingSummary | None:
        """Close the recording once every event published so far is in it; None when not recording."""
        recorder, self.recorder = self.recorder, None
        if recorder is None:
            return None
        try:
            latest = (await self.snapshot()).seq
        except Exception:  # the engine is gone: keep what arrived
            latest = None
        return await asyncio.to_thread(recorder.close, latest)

    # ---- lifecycle -------------------------------------------------------------------------

    def shutdown(self) -> None:
        """End EngineCore (the child process, if any). Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self.recorder is not None:  # the events that have arrived, and the trailer
            self.recorder.close()
            self.recorder = None
        if self._handler is not None and not self._handler.done():
            try:
                self._handler.cancel()
            except RuntimeError:  # its loop is closed
                pass
        try:
            self._fail_requests(EngineDeadError("AsyncLLM was shut down"))
        except RuntimeError:  # queues of a closed loop
            pass
        self.client.shutdown()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc) -> None:
        self.shutdown()

    # ---- plumbing --------------------------------------------------------------------------

    def _check_usable(self) -> None:
        if self._dead is not None:
            raise self._dead
        if self._closed:
            raise EngineDeadError("AsyncLLM was shut down")

    def _ensure_handler(self) -> None:
        loop = asyncio.get_running_loop()
        handler = self._handler
        if handler is None or handler.done() or handler.get_loop() is not loop:  # none yet, or a finished loop's
            self._handler = loop.create_task(self._handle_outputs(), name="enginetui-output-handler")

    async def _handle_outputs(self) -> None:
        """Read EngineCore outputs forever; route them to the requests' queues."""
        try:
            while True:
                outputs = await self.client.get_output()
                for observe in self.output_observers:
                    observe(outputs)
                results, to_abort = self.output_processor.process(outputs.outputs)
                for result in results:
                    queue = self._queues.get(result.request_id)
                    if queue is None:
                        continue
                    queue.put_nowait(result)
                    if result.finished:
                        del self._queues[result.request_id]
                if to_abort:  # stopped by a stop string on this side: free it in the engine
                    await self.client.abort_requests(to_abort)
        except EngineDeadError as exc:
            if not self._closed:
                self._dead = exc
                self._fail_requests(exc)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug here must not leave streams hanging
            log.exception("AsyncLLM output handler failed")
            self._dead = EngineDeadError(f"AsyncLLM output handler failed: {wire.describe(exc)}")
            self._fail_requests(self._dead)
            self.client.shutdown()

    def _fail_requests(self, exc: EngineDeadError) -> None:
        """Every live request gets a final "error" output, then the exception."""
        for result in self.output_processor.fail_all(str(exc)):
            queue = self._queues.get(result.request_id)
            if queue is not None:
                queue.put_nowait(result)
        queues, self._queues = self._queues, {}
        for queue in queues.values():
            queue.put_nowait(exc)

    def _in_background(self, coro) -> None:
        try:
            task = asyncio.get_running_loop().create_task(coro)
        except RuntimeError:  # no running loop (generator finalized at exit)
            coro.close()
            return
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        task.add_done_callback(_ignore_dead)


def _ignore_dead(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None and not isinstance(task.exception(), EngineDeadError):
        log.warning("background abort failed: %s", task.exception())
