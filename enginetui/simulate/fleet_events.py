"""A watched or recorded fleet's step events: one StepEventBuilder per replica, each event tagged with its
replica's index (StepEvent.replica) and numbered in one sequence over the fleet, into the run's sinks (the
recording, whose header lists the replicas' roles, and the live view)."""

import msgspec

from enginetui.core.engine.events import StepEvent
from enginetui.simulate.event_sinks import EventSink, StepEventBuilder


class _ReplicaSink(EventSink):
    """One replica's builder's sink: hands its events to the fleet, tagged."""

    def __init__(self, index: int, fleet: "FleetEvents") -> None:
        self.index = index  # the replica
        self.fleet = fleet  # where its events go

    def emit(self, event: StepEvent) -> None:
        self.fleet.emit(self.index, event)


class FleetEvents:
    """The fleet's sinks (those of `writer`, from from_settings.event_writer) and a builder per replica."""

    def __init__(self, writer: StepEventBuilder, num_replicas: int) -> None:
        self.sinks = writer.sinks  # the recording and / or the live view
        self.seq = 0  # events handed on, over the fleet
        self.builders = [StepEventBuilder(writer.config, [_ReplicaSink(k, self)]) for k in range(num_replicas)]

    def emit(self, replica: int, event: StepEvent) -> None:
        self.seq += 1
        event = msgspec.structs.replace(event, replica=replica, seq=self.seq)
        for sink in self.sinks:
            sink.emit(event)

    def routed(self, replica: int, why: str) -> None:
        """The router sends `replica` its next request, for this reason."""
        self.builders[replica].routed = why

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()
