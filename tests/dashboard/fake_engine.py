"""FakeEngine: a deterministic stand-in for AsyncLLM, for the dashboard's tests and snapshot scenes.

A tiny scheduler over a block pool (waiting -> running, one block per `block_size` tokens,
chunked prefill under a token budget, preemption by recompute when the pool is full, rejection
of prompts that can never fit), a word-level "tokenizer", and a fake clock, so every run
produces the same events and text.
"""

import asyncio
import heapq
import math
import random
from collections import deque
from dataclasses import dataclass, field

from core.engine.events import (
    SCHEMA_VERSION,
    Admission,
    PrefillChunk,
    Preemption,
    RequestAdded,
    RequestEnd,
    RequestProgress,
    StepEvent,
)
from core.engine.processor import EngineInfo
from core.outputs import CompletionOutput, RequestMetrics, RequestOutput
from core.sampling_params import SamplingParams

WORDS = (
    "the a of and to in is was it for on with as at by from that this an be are or not but had "
    "river stone light engine token block cache queue step budget page table kernel model prompt "
    "quiet bright sudden small ancient patient careful golden distant silver gentle curious "
    "walked found carried opened watched turned counted followed answered remembered"
).split()
STEP_SECONDS = 0.05  # fake-clock time one step takes
START_TIME = 1_700_000_000.0  # fake-clock reading before the first step


class FakeEngineDead(RuntimeError):
    """Raised from streams after `die()`, like EngineDeadError."""


@dataclass(slots=True)
class _Request:
    """One request inside the fake scheduler."""

    req_id: str  # client id
    prompt: str  # prompt text
    prompt_ids: list[int]  # "tokenized" prompt (one token per word)
    params: SamplingParams  # its sampling parameters
    arrival_time: float  # fake-clock arrival
    rng: random.Random  # picks its generated words (seeded by the id: deterministic)
    outputs: asyncio.Queue  # RequestOutput (or an exception) for its generate() stream
    output_ids: list[int] = field(default_factory=list)  # generated tokens
    num_computed: int = 0  # tokens whose KV is "cached"
    blocks: list[int] = field(default_factory=list)  # block table
    status: str = "waiting"  # waiting | running | preempted
    num_preemptions: int = 0  # times preempted
    first_scheduled_time: float | None = None  # fake-clock first scheduling
    first_token_time: float | None = None  # fake-clock first token

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_ids) + len(self.output_ids)

    @property
    def text(self) -> str:
        return " ".join(WORDS[t % len(WORDS)] for t in self.output_ids)


class FakeEngine:
    """Implements the dashboard's `Engine` protocol without a model."""

    def __init__(
        self,
        *,
        num_blocks: int = 64,
        block_size: int = 16,
        token_budget: int = 64,
        max_num_seqs: int = 8,
        max_model_len: int = 512,
        step_delay: float = 0.01,
        autostep: bool = True,
        paused: bool = False,
        engine_pid: int | None = 4242,
        control_delay: float = 0.0,
    ) -> None:
        self.model_name = "fake-opt"
        self.device = "cpu"
        # What the model panel shows: facebook/opt-125m's figures in float32, this fake's pool and limits.
        self.info = EngineInfo(
            model_name=self.model_name, model_dir=None, architecture="OPTForCausalLM", num_parameters=125_239_296,
            kv_bytes_per_token=2 * 12 * 768 * 4, vocab_size=len(WORDS) + 1000, max_model_len=max_model_len,
            num_blocks=num_blocks, block_size=block_size, device=self.device, dtype="float32", eos_token_ids=[],
            default_sampling={}, pid=engine_pid or 0,
        )
        self.tokenizer = None  # its requests all come from the app: no one else's to decode
        self.engine_pid = engine_pid
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.token_budget = token_budget
        self.max_num_seqs = max_num_seqs
        self.max_model_len = max_model_len
        self.step_delay = step_delay  # real seconds between steps while running
        self.autostep = autostep  # False: steps only happen through step_once() (deterministic tests)
        self.paused = paused
        self.step_interval = 0.0  # slow motion asked for with set_step_interval (seconds)
        self.control_delay = control_delay  # real seconds a set_step_interval call takes (a busy engine)
        self.shutdown_called = False
        self.step = 0
        self.seq = 0  # events published
        self.clock = START_TIME
        self.total_output_tokens = 0
        self.total_preemptions = 0
        self._free = list(range(num_blocks))  # heap of free block ids (lowest reused first)
        self._running: list[_Request] = []
        self._waiting: deque[_Request] = deque()
        self._requests: dict[str, _Request] = {}
        self._ended: list[RequestEnd] = []  # aborts since the last event
        self._freed: list[int] = []  # blocks freed by aborts since the last event
        self._added: list[RequestAdded] = []  # requests added since the last event
        self._subscribers: list[asyncio.Queue] = []
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task | None = None  # the stepping loop (autostep only)
        self._dead: str | None = None  # why the fake "died" (die()), None while alive
        self._streams: list[asyncio.Queue] = []  # output queues that a generate() stream still reads

    # ---- the Engine protocol -------------------------------------------------------------

    async def generate(self, prompt: str, params: SamplingParams, request_id: str):
        if self._dead:
            raise FakeEngineDead(self._dead)
        if not prompt.strip():
            raise ValueError("prompt is empty")
        if request_id in self._requests:
            raise ValueError(f"request id {request_id!r} is already in use")
        ids = [_token_id(w) for w in prompt.split()]
        if len(ids) >= self.max_model_len:
            raise ValueError(f"prompt has {len(ids)} tokens, max_model_len is {self.max_model_len}")
        req = _Request(request_id, prompt, ids, params, self.clock, random.Random(request_id), asyncio.Queue())
        self._requests[request_id] = req
        self._streams.append(req.outputs)
        self._waiting.append(req)
        self._added.append(RequestAdded(request_id, ids, params, params.max_tokens or self.max_model_len, 0, self.clock))
        self._publish_update()
        self._kick()
        try:
            while True:
                out = await req.outputs.get()
                if isinstance(out, Exception):
                    raise out
                yield out
                if out.finished:
                    return
        finally:  # the consumer is gone: abort whatever is still running
            self._streams.remove(req.outputs)
            if request_id in self._requests:
                self._abort(req)

    async def abort(self, request_id: str) -> None:
        req = self._requests.get(request_id)
        if req is not None:
            self._abort(req)

    async def pause(self) -> None:
        self.paused = True
        self._publish_update()

    async def resume(self) -> None:
        self.paused = False
        self._publish_update()
        self._kick()

    async def step_once(self) -> None:
        self._step()

    async def set_step_interval(self, seconds: float) -> None:
        await asyncio.sleep(self.control_delay)
        self.step_interval = seconds
        self._publish_update()

    async def snapshot(self) -> StepEvent:
        return self._event(kind="snapshot")

    async def events(self):
        queue: asyncio.Queue = asyncio.Queue()
        self._subscribers.append(queue)
        try:
            while True:
                event = await queue.get()
                if isinstance(event, Exception):
                    raise event
                yield event
        finally:
            self._subscribers.remove(queue)

    def shutdown(self) -> None:
        self.shutdown_called = True
        if self._loop_task is not None:
            self._loop_task.cancel()

    # ---- test controls -------------------------------------------------------------------

    def drained(self) -> bool:
        """Every published event and output has been taken by its consumer."""
        return all(q.empty() for q in (*self._subscribers, *self._streams))

    def die(self, message: str = "EngineCore exited with code -9") -> None:
        """Simulate the EngineCore process dying: every stream raises."""
        self._dead = message
        for queue in (*self._subscribers, *self._streams):
            queue.put_nowait(FakeEngineDead(message))
        self.shutdown()

    # ---- the fake scheduler ----------------------------------------------------------------

    def _kick(self) -> None:
        if not self.autostep:
            return
        if self._loop_task is None:
            self._loop_task = asyncio.get_running_loop().create_task(self._run())
        self._wake.set()

    async def _run(self) -> None:
        while True:
            if self.paused or not (self._running or self._waiting):
                self._wake.clear()
                await self._wake.wait()
                continue
            self._step()
            await asyncio.sleep(max(self.step_delay, self.step_interval))

    def _publish(self, event: StepEvent) -> None:
        for queue in self._subscribers:
            queue.put_nowait(event)

    def _publish_update(self) -> None:
        """A change between steps reaches subscribers at once, as the real engine's update events do."""
        freed, self._freed = self._freed, []
        ended, self._ended = self._ended, []
        self._publish(self._event(kind="update", freed=freed, finished=ended))

    def _step(self) -> None:
        self.step += 1
        self.clock += STEP_SECONDS
        budget = self.token_budget
        scheduled: dict[str, int] = {}
        allocated: list[int] = []
        freed, self._freed = self._freed, []
        ended, self._ended = self._ended, []
        preempted: list[Preemption] = []
        rejected: list[RequestEnd] = []
        admitted: list[Admission] = []
        before = {r.req_id: r.num_computed for r in self._running}
        for req in list(self._running):
            if budget == 0 or req.status != "running":
                continue
            n = min(req.num_tokens - req.num_computed, budget)
            while not self._grow(req, req.num_computed + n, allocated):
                victim = self._running[-1]
                preempted.append(self._preempt(victim, freed))
                if victim is req:
                    break
            if req.status == "running":
                scheduled[req.req_id] = n
                budget -= n
        while self._waiting and budget > 0 and len(self._running) < self.max_num_seqs and not preempted:
            req = self._waiting[0]
            need = math.ceil(len(req.prompt_ids) / self.block_size)
            if need > self.num_blocks:
                self._waiting.popleft()
                detail = f"prompt needs {need} blocks > pool {self.num_blocks}"
                rejected.append(RequestEnd(req.req_id, "rejected", detail, 0))
                self._finish(req, "rejected", detail, freed)
                continue
            n = min(req.num_tokens - req.num_computed, budget)
            if not self._grow(req, req.num_computed + n, allocated):
                break
            self._waiting.popleft()
            admitted.append(Admission(req.req_id, n, 0, req.status == "preempted"))
            before[req.req_id] = 0
            req.status = "running"
            req.first_scheduled_time = req.first_scheduled_time or self.clock
            self._running.append(req)
            scheduled[req.req_id] = n
            budget -= n
        num_prefill = 0
        chunks: list[PrefillChunk] = []
        new_tokens: dict[str, list[int]] = {}
        for req_id, n in scheduled.items():
            req = self._requests[req_id]
            num_prefill += n if req.num_tokens - req.num_computed > 1 else 0
            req.num_computed += n
            if req.num_computed < req.num_tokens or (before[req_id] > 0 and n > 1):
                chunks.append(PrefillChunk(req_id, n, req.num_tokens - req.num_computed))
            if req.num_computed == req.num_tokens:
                end = self._sample(req)
                new_tokens[req_id] = req.output_ids[-1:]
                if end is not None:
                    ended.append(end)
                    self._running.remove(req)
                    self._finish(req, end.reason, end.detail, freed)
                else:
                    req.outputs.put_nowait(self._output(req, None))
        total = sum(scheduled.values())
        self._publish(self._event(
            scheduled=scheduled,
            num_prefill=num_prefill,
            num_decode=total - num_prefill,
            allocated=allocated,
            freed=freed,
            preempted=preempted,
            finished=ended,
            rejected=rejected,
            admitted=admitted,
            chunks=chunks,
            new_tokens=new_tokens,
        ))

    def _grow(self, req: _Request, num_tokens: int, allocated: list[int]) -> bool:
        need = math.ceil(num_tokens / self.block_size) - len(req.blocks)
        if need > len(self._free):
            return False
        for _ in range(need):
            block = heapq.heappop(self._free)
            req.blocks.append(block)
            allocated.append(block)
        return True

    def _release(self, req: _Request, freed: list[int]) -> None:
        for block in req.blocks:
            heapq.heappush(self._free, block)
        freed.extend(req.blocks)
        req.blocks = []

    def _preempt(self, req: _Request, freed: list[int]) -> Preemption:
        preemption = Preemption(req.req_id, req.num_computed, len(req.blocks))
        self._release(req, freed)
        self._running.remove(req)
        req.num_computed = 0
        req.status = "preempted"
        req.num_preemptions += 1
        self.total_preemptions += 1
        self._waiting.appendleft(req)
        return preemption

    def _sample(self, req: _Request) -> RequestEnd | None:
        """Generate one token; the end of the request if that finished it."""
        req.output_ids.append(req.rng.randrange(len(WORDS)))
        self.total_output_tokens += 1
        req.first_token_time = req.first_token_time or self.clock
        word = WORDS[req.output_ids[-1] % len(WORDS)]
        if req.params.stop and word in req.params.stop:
            return RequestEnd(req.req_id, "stop", f"stop string {word!r}", len(req.output_ids))
        if len(req.output_ids) >= (req.params.max_tokens or self.max_model_len):
            return RequestEnd(req.req_id, "length", "max_tokens reached", len(req.output_ids))
        return None

    def _finish(self, req: _Request, reason: str, detail: str, freed: list[int]) -> None:
        del self._requests[req.req_id]
        self._release(req, freed)
        req.outputs.put_nowait(self._output(req, reason, detail))

    def _abort(self, req: _Request) -> None:
        if req in self._running:
            self._running.remove(req)
        elif req in self._waiting:
            self._waiting.remove(req)
        self._ended.append(RequestEnd(req.req_id, "abort", "aborted by the client", len(req.output_ids)))
        self._finish(req, "abort", "", self._freed)
        self._publish_update()

    def _output(self, req: _Request, reason: str | None, error: str = "") -> RequestOutput:
        metrics = RequestMetrics(
            arrival_time=req.arrival_time,
            first_scheduled_time=req.first_scheduled_time,
            first_token_time=req.first_token_time,
            last_token_time=self.clock if req.output_ids else None,
            finished_time=self.clock if reason else None,
        )
        completion = CompletionOutput(0, req.text, list(req.output_ids), reason, error=error or None)
        return RequestOutput(req.req_id, req.prompt, list(req.prompt_ids), [completion], reason is not None, metrics)

    def _progress(self, req: _Request) -> RequestProgress:
        return RequestProgress(
            req_id=req.req_id,
            status=req.status,
            num_prompt_tokens=len(req.prompt_ids),
            num_computed_tokens=req.num_computed,
            num_tokens=req.num_tokens,
            num_output_tokens=len(req.output_ids),
            max_tokens=req.params.max_tokens or self.max_model_len,
            num_cached_tokens=0,
            num_preemptions=req.num_preemptions,
            priority=0,
            arrival_time=req.arrival_time,
            block_ids=list(req.blocks),
        )

    def _event(
        self,
        *,
        kind: str = "step",
        scheduled: dict[str, int] | None = None,
        num_prefill: int = 0,
        num_decode: int = 0,
        allocated: list[int] | None = None,
        freed: list[int] | None = None,
        preempted: list[Preemption] | None = None,
        finished: list[RequestEnd] | None = None,
        rejected: list[RequestEnd] | None = None,
        admitted: list[Admission] | None = None,
        chunks: list[PrefillChunk] | None = None,
        new_tokens: dict[str, list[int]] | None = None,
    ) -> StepEvent:
        scheduled = scheduled or {}
        total = sum(scheduled.values())
        if kind != "snapshot":
            self.seq += 1
        added, self._added = (self._added, []) if kind != "snapshot" else ([], self._added)
        return StepEvent(
            version=SCHEMA_VERSION,
            seq=self.seq,
            kind=kind,
            step=self.step,
            time=self.clock,
            paused=self.paused,
            sched_ms=0.1 + 0.02 * len(self._running),
            exec_ms=1.5 + 0.05 * total,
            update_ms=0.2,
            token_budget=self.token_budget,
            max_num_seqs=self.max_num_seqs,
            num_scheduled_tokens=total,
            num_prefill_tokens=num_prefill,
            num_decode_tokens=num_decode,
            scheduled=scheduled,
            added=added,
            admitted=admitted or [],
            chunks=chunks or [],
            new_token_ids=new_tokens or {},
            running=[self._progress(r) for r in self._running],
            waiting=[self._progress(r) for r in self._waiting],
            num_blocks=self.num_blocks,
            block_size=self.block_size,
            num_free_blocks=len(self._free),
            num_cached_free_blocks=0,
            shared_blocks=[],
            cached_free_blocks=[],
            blocks_allocated=allocated or [],
            blocks_freed=freed or [],
            preempted=preempted or [],
            finished=finished or [],
            rejected=rejected or [],
            prefix_cache_queries=0,
            prefix_cache_hits=0,
            num_dropped_events=0,
            total_output_tokens=self.total_output_tokens,
            step_interval_ms=self.step_interval * 1e3,
            total_preemptions=self.total_preemptions,
        )


def _token_id(word: str) -> int:
    return WORDS.index(word) if word in WORDS else len(WORDS) + sum(map(ord, word)) % 1000
