"""A simulated run as step events: the same StepEvent EngineCore publishes, built from the same
scheduler state, stamped with the simulated clock, written as a recording (core/record), so
`enginetui replay`, the timeline and `enginetui export` open a simulated run like a live one, and
handed to `--watch`'s dashboard as they are built.

The fields come from the scheduler's step record and pool view, as EngineCore's event
(core/engine/core.py) takes them; tests/simulate/test_exact_replay.py
checks that, on a real engine's recorded run, these events equal the engine's own in every field
that is not a measured time.
"""

import os
import time

import msgspec

from core.config import EngineConfig
from core.engine.events import (
    SCHEMA_VERSION,
    Admission,
    PrefillChunk,
    Preemption,
    RequestAdded,
    RequestEnd,
    RequestProgress,
    StepEvent,
    StepPhase,
)
from core.engine.processor import EngineInfo
from core.record import format as fmt
from core.record.writer import RecordingWriter
from core.request import Request
from core.sched.scheduler import Scheduler
from enginetui.simulate.simulator import Observer


class EventSink:
    """Where built step events go (a recording file, a live dashboard)."""

    def emit(self, event: StepEvent) -> None:
        """One event, in order."""

    def close(self) -> None:
        """The run is over (or failed): no more events."""


class RecordingSink(EventSink):
    """Writes each event to a recording file as it comes."""

    def __init__(self, path: str | os.PathLike, config: EngineConfig, info: EngineInfo, source: str) -> None:
        header = fmt.Header(event_schema_version=SCHEMA_VERSION, created=time.time(), source=source,
                            enginetui_version=_version(), engine=info, config=msgspec.to_builtins(config),
                            tokenizer=None)
        self.writer = RecordingWriter(path, header)  # the file

    def emit(self, event: StepEvent) -> None:
        self.writer.write_event(_ENCODER.encode(event))

    def close(self) -> None:
        self.writer.close()


class StepEventBuilder(Observer):
    """A simulator observer: builds one event per simulated step and hands it to every sink as it is
    built (requests added between steps go into the next step's event)."""

    def __init__(self, config: EngineConfig, sinks: list[EventSink]) -> None:
        self.config = config  # the simulated engine's flags
        self.sinks = sinks  # where each event goes
        self.seq = 0  # events written
        self.step = 0  # steps seen
        self.total_output_tokens = 0  # tokens generated so far
        self.total_preemptions = 0  # preemptions so far
        self.first_scheduled: dict[str, float] = {}  # request id -> simulated time of its first admission
        self._added: list[RequestAdded] = []  # requests added since the last event

    def on_add(self, request: Request) -> None:
        self._added.append(RequestAdded(request.request_id, request.prompt_token_ids, request.sampling_params,
                                        request.max_tokens, request.priority, request.arrival_time))

    def on_step(self, sched: Scheduler, plan, sampled: dict[str, int], start: float, end: float) -> None:
        self.step += 1
        self.seq += 1
        record = sched.drain_step_record()
        for admitted in record.admitted:
            self.first_scheduled.setdefault(admitted.req_id, start)
        self.total_preemptions += len(record.preempted)
        self.total_output_tokens += len(sampled)
        kv = sched.kv_state()
        added, self._added = self._added, []
        exec_ms = (end - start) * 1e3
        event = StepEvent(
            version=SCHEMA_VERSION, seq=self.seq, kind="step", step=self.step, time=end, paused=False,
            sched_ms=0.0, exec_ms=exec_ms, update_ms=0.0, token_budget=self.config.max_num_batched_tokens,
            max_num_seqs=self.config.max_num_seqs, num_scheduled_tokens=sum(record.scheduled.values()),
            num_prefill_tokens=record.num_prefill_tokens, num_decode_tokens=record.num_decode_tokens,
            scheduled=record.scheduled, added=added,
            admitted=[Admission(a.req_id, a.num_new_tokens, a.num_cached_tokens, a.resumed) for a in record.admitted],
            chunks=[PrefillChunk(c.req_id, c.num_tokens, c.num_remaining) for c in record.chunks],
            new_token_ids={req_id: [t] for req_id, t in sampled.items()},
            running=[self._progress(r, sched) for r in sched.running],
            waiting=[self._progress(r, sched) for r in sched.waiting],
            num_blocks=kv.num_blocks, block_size=self.config.block_size, num_free_blocks=kv.num_free_blocks,
            num_cached_free_blocks=len(kv.cached_free_blocks), shared_blocks=kv.shared_blocks,
            cached_free_blocks=kv.cached_free_blocks,
            blocks_allocated=record.blocks_allocated, blocks_freed=record.blocks_freed,
            preempted=[Preemption(p.req_id, p.lost_tokens, p.freed_blocks) for p in record.preempted],
            finished=[_end(e) for e in record.finished], rejected=[_end(e) for e in record.rejected],
            prefix_cache_queries=kv.prefix_cache_queries, prefix_cache_hits=kv.prefix_cache_hits,
            num_dropped_events=0, total_output_tokens=self.total_output_tokens,
            total_preemptions=self.total_preemptions, step_interval_ms=0.0, forward_ms=exec_ms, sample_ms=0.0,
            planned_step=self.step, executed_step=self.step, phases=[StepPhase(self.step, "execute", start, end)],
        )
        for sink in self.sinks:
            sink.emit(event)

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()

    def _progress(self, r: Request, sched: Scheduler) -> RequestProgress:
        return RequestProgress(
            req_id=r.request_id, status=r.status.value, num_prompt_tokens=r.num_prompt_tokens,
            num_computed_tokens=r.num_computed_tokens, num_tokens=r.num_tokens,
            num_output_tokens=r.num_output_tokens, max_tokens=r.max_tokens, num_cached_tokens=r.num_cached_tokens,
            num_preemptions=r.num_preemptions, priority=r.priority, arrival_time=r.arrival_time,
            block_ids=sched.block_ids(r.request_id), first_scheduled_time=self.first_scheduled.get(r.request_id),
        )


def _end(e) -> RequestEnd:
    return RequestEnd(e.req_id, e.reason, e.detail, e.num_output_tokens)


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("enginetui")
    except metadata.PackageNotFoundError:
        return "unknown"


_ENCODER = msgspec.msgpack.Encoder()
