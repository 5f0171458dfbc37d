"""The replay of a recording of `attach --vllm URL`: vLLM's column beside the engine's panels, as it was live.

What vLLM added (its V frames: /metrics readings, KV event batches, the proxy's requests; vllm_record.py) is
folded into a WatchState up to the event shown, as the live watcher folded it; with the probe's events, each
reading is scored against the probe's state then, as live (its events' times stand for their arrival).
"""

from bisect import bisect_right

from enginetui.core.record.reader import Recording
from enginetui.replay.app import ReplayTUI
from enginetui.replay.session import ReplaySession
from enginetui.vllm_probe.oracle import ProbeTruth
from enginetui.vllm_probe.recording import PROBE_DEVICE
from enginetui.vllm_probe.with_vllm import VllmColumn
from enginetui.vllm_watch import vllm_record
from enginetui.vllm_watch.state import SchedulerLimits, WatchState


class RecordedVllm:
    """vLLM's side of a recording, folded up to any event: `at(k)` is the watcher's state after event k."""

    def __init__(self, recording: Recording) -> None:
        self.recording = recording
        items = [(before, vllm_record.decode(payload)) for before, payload in recording.vllm_items()]
        self._befores = [before for before, _ in items]  # events recorded before each item
        self._items = [item for _, item in items]
        self.exact = recording.header.engine.device == PROBE_DEVICE  # the probe's: readings are scored against it
        self.state, self.truth = self._fresh()
        self._folded = 0  # items folded into `state`
        self._events = 0  # events told to `truth`

    def __bool__(self) -> bool:
        return bool(self._items)

    def at(self, index: int) -> WatchState:
        upto = bisect_right(self._befores, index + 1)
        if upto < self._folded:  # back: fold again from the start
            self.state, self.truth = self._fresh()
            self._folded = self._events = 0
        for before, item in zip(self._befores[self._folded : upto], self._items[self._folded : upto]):
            if self.truth is not None:
                for k in range(self._events, before):
                    event = self.recording.event(k)
                    self.truth.event(event, event.time)
                self._events = max(self._events, before)
            self.state.apply_recorded(item)
            if self.truth is not None and isinstance(item, vllm_record.Metrics):
                self.truth.reading(item.sample)
                self.truth.score_rebuild(self.state.rebuild)
        self._folded = upto
        return self.state

    def _fresh(self) -> tuple[WatchState, ProbeTruth | None]:
        first = self._items[0] if self._items else None
        watching = first if isinstance(first, vllm_record.Watching) else vllm_record.Watching(0.0, "", None)
        # vLLM's limits were given on the command line, not recorded; every step event carries them
        event = self.recording.event(0) if len(self.recording) else None
        limits = SchedulerLimits(event.max_num_seqs, event.token_budget, "recording") if event else SchedulerLimits()
        state = WatchState(watching.url, watching.kv_endpoint, limits=limits)
        return state, ProbeTruth() if self.exact else None


class VllmReplayTUI(VllmColumn, ReplayTUI):
    """The replay with vLLM's column, redrawn from the recording's V frames at each event shown."""

    def __init__(self, session: ReplaySession, recorded: RecordedVllm, **kwargs) -> None:
        super().__init__(session, **kwargs)
        self.recorded = recorded  # vLLM's side of the recording
        self.vllm = recorded.at(self.index)
        self.truth = recorded.truth

    def _step_at(self, when: float) -> int:
        at = bisect_right(self.session.times, when)
        return self.session.recording.heads[at - 1].step if at else 0

    def show_event(self, index: int) -> None:
        self.vllm = self.recorded.at(max(0, min(len(self.session) - 1, index)))
        self.truth = self.recorded.truth
        self._vllm_drawn = None  # it may be a new state object
        super().show_event(index)


def replay_app(session: ReplaySession, **kwargs) -> ReplayTUI:
    """The replay's app: with vLLM's column where the recording has what vLLM added."""
    recorded = RecordedVllm(session.recording)
    return VllmReplayTUI(session, recorded, **kwargs) if recorded else ReplayTUI(session, **kwargs)
