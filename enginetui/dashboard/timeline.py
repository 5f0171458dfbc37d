"""The timeline's model: each request's life as phases per engine step, folded from step events.

One lane per request: the steps it spent waiting, each step a prefill chunk of it ran, decoding,
the step it was preempted, waiting again after that, the recompute of its lost work, and how it
ended. Pure Python (no Textual): DashboardState folds every event into it, live and in replay,
and the timeline widget draws the lanes that overlap the steps on screen.
"""

from dataclasses import dataclass, field

from enginetui.core.engine.events import StepEvent

MAX_LANES = 512  # lanes kept: the oldest ended ones are dropped past this
MAX_ASYNC_STEPS = 4096  # async scheduling: engine steps whose planned / executed step numbers are kept

# Phase of a request at one step (what a lane cell shows).
WAITING = "waiting"  # queued, never run yet
PREFILL = "prefill"  # a chunk of its prompt ran this step
DECODE = "decode"  # it generated a token this step
STALLED = "stalled"  # running, but the step's budget left it nothing
REQUEUED = "requeued"  # waiting again after a preemption
RECOMPUTE = "recompute"  # a chunk of its lost KV was recomputed this step
PHASES = (WAITING, PREFILL, DECODE, STALLED, REQUEUED, RECOMPUTE)


@dataclass(slots=True)
class Lane:
    """One request's life, step by step."""

    req_id: str  # the request
    first_step: int  # the step of its first cell (it arrived just before it)
    segments: list[tuple[str, int, int]] = field(default_factory=list)  # (phase, first step, last step), in order
    preemptions: list[int] = field(default_factory=list)  # steps at which it was preempted
    end: tuple[int, str] | None = None  # (step of the end mark, finish reason) once it left
    recomputing: bool = False  # admitted again after a preemption, its lost KV not yet recomputed
    num_chunks: int = 0  # prefill (and recompute) steps it has had

    @property
    def last_step(self) -> int:
        """The last step this lane covers (its end mark included)."""
        last = self.segments[-1][2] if self.segments else self.first_step - 1
        return max(last, self.end[0] if self.end else last, *self.preemptions[-1:])

    def phase_at(self, step: int) -> str | None:
        """What it was doing at `step` (None outside its segments)."""
        for phase, first, last in reversed(self.segments):
            if first <= step <= last:
                return phase
            if last < step:
                return None
        return None

    def mark(self, step: int, phase: str) -> None:
        """It was in `phase` at `step` (extends the last segment when it continues it)."""
        if self.segments:
            last_phase, first, last = self.segments[-1]
            if last_phase == phase and last == step - 1:
                self.segments[-1] = (phase, first, step)
                return
            if last >= step:  # an event seen twice (a repeat after a gap): keep the first word
                return
        self.segments.append((phase, step, step))

    def clone(self) -> "Lane":
        return Lane(
            self.req_id,
            self.first_step,
            list(self.segments),
            list(self.preemptions),
            self.end,
            self.recomputing,
            self.num_chunks,
        )


@dataclass(slots=True)
class Timeline:
    """Every recent request's lane, in order of arrival."""

    lanes: dict[str, Lane] = field(default_factory=dict)  # req_id -> lane, oldest first
    last_step: int = 0  # the latest engine step folded in
    max_lanes: int | None = MAX_LANES  # lanes kept: the oldest ended ones go past this (None: every lane)
    # Async scheduling: engine step -> (step planned, step executed) in it (0: none); empty for synchronous runs.
    async_steps: dict[int, tuple[int, int]] = field(default_factory=dict)

    def apply(self, event: StepEvent) -> None:
        """Fold one event: arrivals and ends from any event, each request's phase from a step's."""
        after = 0 if event.is_step else 1  # between steps: the change shows from the next step on
        for added in event.added:
            self._lane(added.req_id, event.step + after)
        if event.is_step:
            self._apply_step(event)
            if event.async_scheduling:
                self.async_steps[event.step] = (event.planned_step, event.executed_step)
                self.async_steps.pop(event.step - MAX_ASYNC_STEPS, None)
        else:  # a snapshot or update: requests it lists that we never saw arrive (we joined late)
            for p in (*event.running, *event.waiting):
                self._lane(p.req_id, event.step + 1)
        for end in (*event.finished, *event.rejected):
            lane = self._lane(end.req_id, event.step + after)
            if lane.end is None:
                ran = event.is_step and end.req_id in event.scheduled
                lane.end = (event.step + (1 if ran or not event.is_step else 0), end.reason)
        self.last_step = max(self.last_step, event.step)
        self._trim()

    def clone(self) -> "Timeline":
        return Timeline(
            {k: lane.clone() for k, lane in self.lanes.items()}, self.last_step, self.max_lanes, dict(self.async_steps)
        )

    def _apply_step(self, event: StepEvent) -> None:
        step = event.step
        admitted = {a.req_id: a for a in event.admitted}
        chunked = {c.req_id for c in event.chunks}
        for a in event.admitted:
            lane = self._lane(a.req_id, step)
            lane.recomputing = a.resumed
        for req_id in event.scheduled:
            lane = self._lane(req_id, step)
            if req_id in chunked or req_id in admitted:
                lane.num_chunks += 1
                lane.mark(step, RECOMPUTE if lane.recomputing else PREFILL)
            else:
                lane.recomputing = False
                lane.mark(step, DECODE)
        for pre in event.preempted:
            lane = self._lane(pre.req_id, step)
            lane.preemptions.append(step)
            lane.recomputing = False
        for p in event.running:
            if p.req_id not in event.scheduled:
                self._lane(p.req_id, step).mark(step, STALLED)
        for p in event.waiting:
            lane = self._lane(p.req_id, step)
            if step not in lane.preemptions:  # the preemption mark is its cell this step
                lane.mark(step, REQUEUED if p.status == "preempted" else WAITING)

    def _lane(self, req_id: str, first_step: int) -> Lane:
        lane = self.lanes.get(req_id)
        if lane is None:
            lane = self.lanes[req_id] = Lane(req_id, first_step)
        return lane

    def _trim(self) -> None:
        """Past max_lanes, drop the oldest lanes that have ended."""
        if self.max_lanes is None:
            return
        excess = len(self.lanes) - self.max_lanes
        if excess <= 0:
            return
        for req_id in [k for k, lane in self.lanes.items() if lane.end is not None][:excess]:
            del self.lanes[req_id]
