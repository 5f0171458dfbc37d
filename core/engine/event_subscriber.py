"""A blocking-code subscriber to EngineCore's events: a SUB socket read by a daemon thread.

    sub = EventSubscriber(llm.engine.client.events_address, on_event=events.append)
    llm.generate(...)
    sub.catch_up(llm.engine.snapshot().seq)   # every event published so far has been handled
    sub.close()

(asyncio code uses AsyncLLM.events() instead.) Like every subscriber it is greeted with a
snapshot, may fall behind and lose events without slowing the engine, and counts what it
missed (events.MissedEvents) into each event's `num_dropped_events`.
"""

import threading
from collections.abc import Callable

import zmq

from enginetui.core.engine.events import MissedEvents, StepEvent, decode_event

RCVHWM = 64  # events buffered before the publisher drops this subscriber's copies
POLL_MS = 50  # how often the thread checks whether it should stop


class EventSubscriber:
    """Calls `on_event` (on its own thread) with every event EngineCore publishes."""

    def __init__(
        self, address: str, on_event: Callable[[StepEvent], None], rcvhwm: int = RCVHWM, ready_timeout_s: float = 30.0
    ) -> None:
        self.address = address  # EngineCore's PUB address (ipc://...)
        self.on_event = on_event  # receives each event, in order
        self.missed = MissedEvents()  # events that never reached us
        self._rcvhwm = rcvhwm  # see RCVHWM
        self._latest_seq = -1  # seq of the latest event handled
        self._cond = threading.Condition()  # guards _latest_seq; notified after every event
        self._stop = threading.Event()  # ends the thread
        self._thread = threading.Thread(target=self._run, name="event-subscriber", daemon=True)
        self._thread.start()
        with self._cond:  # the greeting snapshot says we are subscribed
            if not self._cond.wait_for(lambda: self._latest_seq >= 0, ready_timeout_s):
                self.close()
                raise TimeoutError(
                    f"no snapshot from EngineCore's event socket {address} within {ready_timeout_s:.0f} s"
                )

    def catch_up(self, seq: int, timeout_s: float = 10.0) -> bool:
        """Block until the event numbered `seq` (or a later one) has been handled; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._latest_seq >= seq, timeout_s)

    def close(self) -> None:
        """Stop after handling the events that have already arrived."""
        self._stop.set()
        self._thread.join(timeout=5.0)

    def _run(self) -> None:
        ctx = zmq.Context()
        sock = ctx.socket(zmq.SUB)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVHWM, self._rcvhwm)
        sock.connect(self.address)
        sock.setsockopt(zmq.SUBSCRIBE, b"")
        try:
            while True:
                stopping = self._stop.is_set()  # then take what has already arrived, and end
                if not sock.poll(0 if stopping else POLL_MS):
                    if stopping:
                        return
                    continue
                seq = self._handle(sock.recv())
                with self._cond:
                    self._latest_seq = max(self._latest_seq, seq)
                    self._cond.notify_all()
        finally:
            sock.close(linger=0)
            ctx.term()

    def _handle(self, data: bytes) -> int:
        """Take one published event (its encoded bytes); returns its seq."""
        event = self.missed.mark(decode_event(data))
        self.on_event(event)
        return event.seq
