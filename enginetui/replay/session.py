"""A recording opened for viewing: the dashboard's state after any event, fast both ways.

The state after event k is the fold of events 0..k into a fresh DashboardState, exactly as a
live dashboard attached to the recorded engine folds them (every request is someone else's: its
prompt and text are decoded from the events' token ids with the recorded tokenizer, its times
are the events' times). Moving forward folds the next events into the current state; moving
back restores the nearest checkpoint before k (a copy of the state kept every few events while
folding) and folds forward from it.
"""

from bisect import bisect_left, bisect_right

from enginetui.core.record.reader import Recording
from enginetui.dashboard.state import DashboardState

CHECKPOINT_EVENTS = 64  # events between checkpoints, at least (more while the state holds many requests)
REQUESTS_PER_EVENT = 8  # a checkpoint every (requests held / this) events when that is more


class ReplaySession:
    """Positions are event indexes 0..len-1; `state_at(k)` is what the dashboard showed after event k."""

    def __init__(self, recording: Recording, tokenizer=None, history_interval: float = 0.5) -> None:
        self.recording = recording  # the file, indexed
        self.tokenizer = tokenizer  # the recorded HF tokenizer (None: no text)
        self.history_interval = history_interval  # sparkline sampling, as the live dashboard's
        heads = recording.heads
        self.times = [h.time for h in heads]  # per event: wall-clock time it was built
        self.step_indexes = [i for i, h in enumerate(heads) if h.kind == "step"]  # events that are steps
        self._steps = [heads[i].step for i in self.step_indexes]  # their step numbers, ascending
        self._checkpoints: dict[int, DashboardState] = {}  # event index -> the state after it
        self._state = self._fresh()  # the working state
        self._at = -1  # the event the working state is at (-1: none folded)
        self._since_checkpoint = 0  # events folded since the last checkpoint

    def __len__(self) -> int:
        return len(self.recording)

    def state_at(self, index: int) -> DashboardState:
        """The state after event `index` (clamped to the recording)."""
        index = max(0, min(len(self) - 1, index))
        if index < self._at:  # back: from the nearest checkpoint at or before it
            start = max((k for k in self._checkpoints if k <= index), default=None)
            if start is None:
                self._state, self._at = self._fresh(), -1
            else:
                self._state, self._at = self._checkpoints[start].clone(), start
            self._since_checkpoint = 0
        while self._at < index:
            self._fold(self._at + 1)
        return self._state

    # ---- navigation ----------------------------------------------------------------------

    def next_step(self, index: int) -> int | None:
        """The first step event after `index` (None: none left)."""
        at = bisect_right(self.step_indexes, index)
        return self.step_indexes[at] if at < len(self.step_indexes) else None

    def previous_step(self, index: int) -> int | None:
        """The last step event before `index` (None: none)."""
        at = bisect_left(self.step_indexes, index) - 1
        return self.step_indexes[at] if at >= 0 else None

    def index_of_step(self, step: int) -> int | None:
        """The event of engine step `step` (None when the recording has no such step)."""
        at = bisect_left(self._steps, step)
        return self.step_indexes[at] if at < len(self._steps) and self._steps[at] == step else None

    def index_at(self, seconds: float) -> int:
        """The last event at most `seconds` after the recording's first (clamped)."""
        return max(0, bisect_right(self.times, self.times[0] + seconds) - 1)

    def seconds_at(self, index: int) -> float:
        """Seconds from the recording's first event to event `index`."""
        return self.times[index] - self.times[0]

    @property
    def steps(self) -> tuple[int, int]:
        """The first and last engine step the recording holds (0, 0 without steps)."""
        return (self._steps[0], self._steps[-1]) if self._steps else (0, 0)

    # ---- folding -------------------------------------------------------------------------

    def _fresh(self) -> DashboardState:
        return DashboardState(history_interval=self.history_interval, tokenizer=self.tokenizer)

    def _fold(self, index: int) -> None:
        state = self._state
        state.apply_event(self.recording.event(index))
        self._at = index
        self._since_checkpoint += 1
        every = max(CHECKPOINT_EVENTS, len(state.requests) // REQUESTS_PER_EVENT)
        if index not in self._checkpoints and (index == 0 or self._since_checkpoint >= every):
            self._checkpoints[index] = state.clone()
            self._since_checkpoint = 0
