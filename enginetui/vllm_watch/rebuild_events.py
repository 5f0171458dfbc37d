"""The outside rebuild's steps as StepEvents: the same event our engine publishes, built by the same builder
(core/engine/event_builder.py, through the simulator's StepEventBuilder), with what the wire cannot tell
left out: no prompt or output token ids (a prompt has its length only; tokens are counted, not named).
"""

from collections.abc import Callable

import msgspec

from enginetui.core.config import EngineConfig
from enginetui.core.engine.event_builder import EngineTotals, StepSummary, StepTimes, StepWork, build_step_event
from enginetui.core.engine.events import RequestAdded, RequestEnd, StepEvent
from enginetui.core.request import Request
from enginetui.core.sched.scheduler import Scheduler
from enginetui.core.sched.step_shape import StepShape
from enginetui.simulate.event_sinks import EventSink, StepEventBuilder


class RebuildEvents(StepEventBuilder):
    """Builds one StepEvent per rebuilt step (and an update for what happens between steps)."""

    def __init__(self, config: EngineConfig, sinks: list[EventSink], wire_reason: Callable[[str], str | None]) -> None:
        super().__init__(config, [_Unnamed(sinks, wire_reason)])
        self._pending: list[Request] = []  # requests entered since the last event (their prompt length may come later)

    def on_add(self, request: Request) -> None:
        self._pending.append(request)

    def on_step(self, sched: Scheduler, plan, sampled: dict[str, int], start: float, end: float) -> None:
        self._added_now()
        super().on_step(sched, plan, sampled, start, end)

    def on_update(self, sched: Scheduler, when: float) -> None:
        """Requests entered or ended between steps (an idle rebuild's finishes)."""
        record = sched.drain_step_record()
        self._added_now()
        if not (record.finished or record.rejected or self._added):
            return
        self.seq += 1
        added, self._added = self._added, []
        totals = EngineTotals(
            self.seq, self.step, when, False, self.total_output_tokens, self.total_preemptions, 0.0, False
        )
        latest = StepSummary({}, 0, 0, [], StepTimes(), StepShape())
        event = build_step_event(
            "update", totals, self.config, sched, record, latest, added, {}, StepWork(0, 0, []), self.first_scheduled
        )
        for sink in self.sinks:
            sink.emit(event)

    def _added_now(self) -> None:
        """The requests entered, with their prompt's length as known now and no token ids (the wire has none)."""
        for r in self._pending:
            self._added.append(
                RequestAdded(r.request_id, [], r.sampling_params, r.max_tokens, r.priority, r.arrival_time, "")
            )
        self._pending.clear()


class _Unnamed(EventSink):
    """Passes events on with each step's sampled requests and no token ids (the rebuild samples stand-ins), and
    each finish with the reason vLLM's stream gave (the rebuild stops a request where its stream stopped)."""

    def __init__(self, sinks: list[EventSink], wire_reason: Callable[[str], str | None]) -> None:
        self.sinks = sinks
        self.wire_reason = wire_reason  # request id -> its stream's finish_reason (None: it gave none)

    def emit(self, event: StepEvent) -> None:
        finished = [
            RequestEnd(e.req_id, reason, "vLLM's stream ended", e.num_output_tokens)
            if (reason := self.wire_reason(e.req_id)) and reason != e.reason
            else e
            for e in event.finished
        ]
        event = msgspec.structs.replace(
            event, new_token_ids={req_id: [] for req_id in event.new_token_ids}, finished=finished
        )
        for sink in self.sinks:
            sink.emit(event)

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()
