"""A simulated run as step events: the same StepEvent EngineCore publishes, built from the same
scheduler state, stamped with the simulated clock, written as a recording (core/record), so
`enginetui replay`, the timeline and `enginetui export` open a simulated run like a live one, and
handed to `--watch`'s dashboard as they are built.

The fields are filled by core/engine/step_event.build_step_event, the function EngineCore builds
its own events with, from the scheduler's step record and pool view; tests/simulate/test_exact_replay.py
checks that, on a real engine's recorded run, these events equal the engine's own in every field
that is not a measured time.
"""

import os
import time

import msgspec

from enginetui.core.config import EngineConfig
from enginetui.core.engine.engine_info import EngineInfo
from enginetui.core.engine.event_builder import EngineTotals, StepSummary, StepTimes, StepWork, build_step_event
from enginetui.core.engine.events import SCHEMA_VERSION, RequestAdded, StepEvent, StepPhase
from enginetui.core.record import format as fmt
from enginetui.core.record.writer import RecordingWriter
from enginetui.core.request import Request
from enginetui.core.sched.scheduler import Scheduler
from enginetui.simulate.simulator import Observer


class EventSink:
    """Where built step events go (a recording file, a live dashboard)."""

    def emit(self, event: StepEvent) -> None:
        """One event, in order."""

    def close(self) -> None:
        """The run is over (or failed): no more events."""


class RecordingSink(EventSink):
    """Writes each event to a recording file as it comes."""

    def __init__(
        self,
        path: str | os.PathLike,
        config: EngineConfig,
        info: EngineInfo,
        source: str,
        replicas: list[str] | None = None,
        replica_models: list[str] | None = None,
    ) -> None:
        header = fmt.Header(
            event_schema_version=SCHEMA_VERSION,
            created=time.time(),
            source=source,
            enginetui_version=_version(),
            engine=info,
            config=msgspec.to_builtins(config),
            tokenizer=None,
            replicas=replicas or [],
            replica_models=replica_models or [],
        )
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
        self.routed = ""  # a fleet's replica: why the router sent it the next request added

    def on_add(self, request: Request) -> None:
        self._added.append(
            RequestAdded(
                request.request_id,
                request.prompt_token_ids,
                request.sampling_params,
                request.max_tokens,
                request.priority,
                request.arrival_time,
                self.routed,
            )
        )

    def on_step(self, sched: Scheduler, plan, sampled: dict[str, int], start: float, end: float) -> None:
        self.step += 1
        self.seq += 1
        record = sched.drain_step_record()
        for admitted in record.admitted:
            self.first_scheduled.setdefault(admitted.req_id, start)
        self.total_preemptions += len(record.preempted)
        self.total_output_tokens += len(sampled)
        added, self._added = self._added, []
        exec_ms = (end - start) * 1e3
        totals = EngineTotals(
            self.seq, self.step, end, False, self.total_output_tokens, self.total_preemptions, 0.0, False
        )
        latest = StepSummary.of(record, StepTimes(exec_ms=exec_ms, forward_ms=exec_ms))
        work = StepWork(self.step, self.step, [StepPhase(self.step, "execute", start, end)])
        event = build_step_event(
            "step",
            totals,
            self.config,
            sched,
            record,
            latest,
            added,
            {req_id: [t] for req_id, t in sampled.items()},
            work,
            self.first_scheduled,
        )
        for sink in self.sinks:
            sink.emit(event)

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("enginetui")
    except metadata.PackageNotFoundError:
        return "unknown"


_ENCODER = msgspec.msgpack.Encoder()
