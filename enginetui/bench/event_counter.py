"""A live step-event subscriber in a thread, as the dashboard would be: it receives and decodes
every StepEvent EngineCore publishes and keeps each step's counts, so a benchmark can both
measure what a subscriber costs and sum what the steps did (prefill tokens, preemptions).
"""

import threading
from dataclasses import dataclass

import zmq

from core.engine.events import decode_event

RCVHWM = 64  # events buffered before the publisher starts dropping (as the dashboard's subscriber)
POLL_MS = 50  # how often the thread checks whether it should stop


@dataclass(slots=True)
class StepCounts:
    """What the steps in a window did, summed from their events."""

    steps: int  # steps whose event arrived
    missed: int  # steps in the window whose event never arrived (dropped by the publisher)
    prefill_tokens: int  # prompt (and recompute) tokens computed
    decode_tokens: int  # decode tokens computed
    preemptions: int  # requests preempted


class EventCounter:
    """SUB socket on EngineCore's event address, read by a daemon thread."""

    def __init__(self, address: str, ready_timeout_s: float = 30.0) -> None:
        self.address = address  # EngineCore's PUB address (ipc://...)
        self._steps: dict[int, tuple[int, int, int]] = {}  # step -> (prefill, decode, preempted)
        self._latest = 0  # highest step seen, snapshots included
        self._cond = threading.Condition()  # guards the two above; notified on every event
        self._stop = threading.Event()  # ends the thread
        self._ready = threading.Event()  # set once the greeting snapshot arrived (we are subscribed)
        self._thread = threading.Thread(target=self._run, name="bench-event-subscriber", daemon=True)
        self._thread.start()
        if not self._ready.wait(ready_timeout_s):
            self.close()
            raise TimeoutError(f"no snapshot from EngineCore's event socket {address} within {ready_timeout_s:.0f} s")

    def wait_for_step(self, step: int, timeout_s: float = 10.0) -> None:
        """Block until the event of `step` (or a later one) arrived, or the timeout passed."""
        with self._cond:
            self._cond.wait_for(lambda: self._latest >= step, timeout_s)

    def counts(self, after_step: int, through_step: int) -> StepCounts:
        """Sum the events of steps after_step+1 .. through_step."""
        with self._cond:
            rows = [self._steps[s] for s in range(after_step + 1, through_step + 1) if s in self._steps]
        return StepCounts(
            steps=len(rows), missed=(through_step - after_step) - len(rows),
            prefill_tokens=sum(r[0] for r in rows), decode_tokens=sum(r[1] for r in rows),
            preemptions=sum(r[2] for r in rows),
        )

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)

    def _run(self) -> None:
        ctx = zmq.Context()
        sock = ctx.socket(zmq.SUB)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVHWM, RCVHWM)
        sock.connect(self.address)
        sock.setsockopt(zmq.SUBSCRIBE, b"")
        try:
            while not self._stop.is_set():
                if not sock.poll(POLL_MS):
                    continue
                event = decode_event(sock.recv())
                with self._cond:
                    if not event.is_snapshot:
                        self._steps[event.step] = (event.num_prefill_tokens, event.num_decode_tokens, len(event.preempted))
                    self._latest = max(self._latest, event.step)
                    self._cond.notify_all()
                self._ready.set()
        finally:
            sock.close(linger=0)
            ctx.term()
