"""The engine under the dashboard's tests: the real one (AsyncLLM, EngineCore and its busy loop on a
thread of this process, the embedded model's tokenizer) with the scripted model runner of
tests/fakes/scripted_runner.py, so every request's text is fixed and a step costs no compute.

Two ways to run it:

- `autostep=False`: EngineCore starts paused and steps only when `step_once()` asks (the engine's own
  `step` control), so every run produces the same events. Its clock is pinned too: each wall-clock
  reading in an event or output (event time, arrival, first scheduled, first token, finish) is
  replaced by START_TIME + STEP_SECONDS x (hand steps asked for before that reading), and a step's
  sched / exec / update milliseconds by fixed figures of its size; the pictures never depend on
  how fast this machine is. Everything else is what the engine sent.
- `autostep=True`: EngineCore runs freely, each step taking PACED_STEP_SECONDS (the runner sleeps, as
  a model would compute), with real times.
"""

import asyncio
import bisect
import dataclasses
import time
from typing import ClassVar

import msgspec

from enginetui.core.engine.async_llm import AsyncLLM
from enginetui.core.engine.events import RequestProgress, StepEvent
from enginetui.core.outputs import RequestOutput
from enginetui.core.sampling_params import SamplingParams
from tests.fakes.scripted_runner import PACED_RUNNER, SCRIPTED_RUNNER

STEP_SECONDS = 0.05  # pinned-clock time one hand step takes
START_TIME = 1_700_000_000.0  # pinned-clock reading before the first hand step


class ScriptedEngine:
    """Implements the dashboard's `Engine` protocol (enginetui/dashboard/engine_link.py) by delegating to the
    real AsyncLLM; adds what tests need to drive and inspect it."""

    made: ClassVar[list["ScriptedEngine"]] = []  # every one made (tests/dashboard/conftest.py shuts them down)

    def __init__(
        self,
        *,
        num_blocks: int = 64,
        block_size: int = 16,
        token_budget: int = 64,
        max_num_seqs: int = 8,
        max_model_len: int = 512,
        autostep: bool = True,
        control_delay: float = 0.0,
    ) -> None:
        self.llm = AsyncLLM.from_engine_args(
            model=None,
            model_runner=PACED_RUNNER if autostep else SCRIPTED_RUNNER,
            multiprocess=False,
            device="cpu",
            seed=0,
            num_gpu_blocks_override=num_blocks,
            block_size=block_size,
            max_num_batched_tokens=token_budget,
            max_num_seqs=max_num_seqs,
            max_model_len=max_model_len,
        )
        ScriptedEngine.made.append(self)
        self.core = self.llm.client.core  # EngineCore: read its figures only, while the test waits
        if not autostep:  # it starts paused: set before any client has seen it (no change to report), while
            self.core.paused = True  # its idle busy loop waits on its inbox
        self.by_hand = not autostep  # steps only through step_once(), on the pinned clock
        self.control_delay = control_delay  # seconds a set_step_interval call takes to arrive (a busy link)
        self.model_name = self.llm.model_name  # as AsyncLLM's (tests may rename it)
        self.info = self.llm.info  # as AsyncLLM's (tests may take it away: None)
        self.params: dict[str, SamplingParams] = {}  # request id -> the sampling parameters it was sent with
        self.shutdown_called = False  # shutdown() was called
        self._step_marks: list[float] = []  # time.time() as each hand step was asked for
        self._steps_asked = 0  # step_once() calls that have not returned yet
        self._latest_seq = -1  # seq of the latest event handed to a subscriber

    # ---- the Engine protocol -------------------------------------------------------------

    @property
    def engine_pid(self) -> int | None:
        return self.llm.engine_pid

    @property
    def device(self) -> str:
        return self.llm.device

    @property
    def tokenizer(self):
        return self.llm.tokenizer

    async def generate(self, prompt: str, params: SamplingParams, request_id: str):
        self.params[request_id] = params
        stream = self.llm.generate(prompt, params, request_id)
        try:
            async for out in stream:
                yield self._pin_output(out)
        finally:
            await stream.aclose()

    async def abort(self, request_id: str) -> None:
        await self.llm.abort(request_id)

    async def pause(self) -> None:
        await self.llm.pause()

    async def resume(self) -> None:
        await self.llm.resume()

    async def step_once(self) -> None:
        self._steps_asked += 1
        self._step_marks.append(time.time())
        try:
            await self.llm.step_once()
        finally:
            self._steps_asked -= 1

    async def set_step_interval(self, seconds: float) -> None:
        await asyncio.sleep(self.control_delay)
        await self.llm.set_step_interval(seconds)

    async def snapshot(self) -> StepEvent:
        return self._pin_event(await self.llm.snapshot())

    async def events(self):
        async for event in self.llm.events():
            self._latest_seq = max(self._latest_seq, event.seq)
            yield self._pin_event(event)

    def shutdown(self) -> None:
        self.shutdown_called = True
        self.llm.shutdown()

    # ---- for tests -----------------------------------------------------------------------

    @property
    def paused(self) -> bool:
        return self.core.paused

    @property
    def step_interval(self) -> float:
        """The engine's slow motion, seconds per step."""
        return self.core.step_interval_s

    @property
    def total_preemptions(self) -> int:
        return self.core.total_preemptions

    def drained(self) -> bool:
        """Every output that arrived taken by its caller (AsyncLLM's per-request queues are empty);
        stepped by hand, also: no step under way and every event published so far handed to a
        subscriber. (A running engine always has its next event coming: only what arrived counts.)"""
        outputs_taken = all(q.empty() for q in self.llm._queues.values())
        if not self.by_hand:
            return outputs_taken
        return outputs_taken and self._steps_asked == 0 and self._latest_seq >= self.core.event_seq

    def why_not_drained(self) -> str:
        """What drained() waits for (for a test's timeout message)."""
        waiting = {rid: q.qsize() for rid, q in self.llm._queues.items() if not q.empty()}
        return (
            f"outputs not taken: {waiting}, hand steps under way: {self._steps_asked}, latest event handed "
            f"to a subscriber: {self._latest_seq}, engine's latest event: {self.core.event_seq}"
        )

    def die(self) -> None:
        """End EngineCore under the client, as if its process had been killed: its busy loop gets a
        Shutdown the client did not send, and the client finds it gone."""
        from enginetui.core.engine import wire

        self.llm.client.host.in_sock.send(wire.encode(wire.Shutdown()))

    # ---- the pinned clock ----------------------------------------------------------------

    def _pin_time(self, t: float | None) -> float | None:
        if t is None or not self.by_hand:
            return t
        return START_TIME + STEP_SECONDS * bisect.bisect_right(self._step_marks, t)

    def _pin_progress(self, p: RequestProgress) -> RequestProgress:
        return msgspec.structs.replace(
            p, arrival_time=self._pin_time(p.arrival_time), first_scheduled_time=self._pin_time(p.first_scheduled_time)
        )

    def _pin_event(self, event: StepEvent) -> StepEvent:
        if not self.by_hand:
            return event
        added = [msgspec.structs.replace(a, arrival_time=self._pin_time(a.arrival_time)) for a in event.added]
        return msgspec.structs.replace(
            event,
            time=self._pin_time(event.time),
            sched_ms=0.1 + 0.02 * len(event.running),
            exec_ms=1.5 + 0.05 * event.num_scheduled_tokens,
            update_ms=0.2,
            running=[self._pin_progress(p) for p in event.running],
            waiting=[self._pin_progress(p) for p in event.waiting],
            added=added,
        )

    def _pin_output(self, out: RequestOutput) -> RequestOutput:
        if not self.by_hand:
            return out
        m = out.metrics
        metrics = dataclasses.replace(
            m,
            arrival_time=self._pin_time(m.arrival_time),
            first_scheduled_time=self._pin_time(m.first_scheduled_time),
            first_token_time=self._pin_time(m.first_token_time),
            last_token_time=self._pin_time(m.last_token_time),
            finished_time=self._pin_time(m.finished_time),
        )
        return dataclasses.replace(out, metrics=metrics)
