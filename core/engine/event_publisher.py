"""Publishes StepEvents on a PUB socket without ever blocking the engine.

The socket is an XPUB with XPUB_NODROP and a small SNDHWM: a send that would have to wait for a
slow subscriber fails at once with zmq.Again, and the event is counted as dropped instead. The
count since the last delivered event goes out in the next delivered event (`num_dropped_events`).
XPUB also tells the publisher when a subscriber joins, so EngineCore can greet it with a
snapshot (a late subscriber can draw the full state at once).

Owned by one thread (EngineCore's output thread); zmq sockets are not thread-safe.
"""

import msgspec
import zmq

from core.engine.events import StepEvent, encode_event

PUB_SNDHWM = 64  # events queued per subscriber before sends count as drops


class EventPublisher:
    """The engine side of the step-event stream."""

    def __init__(self, ctx: zmq.Context, address: str, hwm: int = PUB_SNDHWM) -> None:
        self.sock = ctx.socket(zmq.XPUB)  # bound; subscribers connect
        self.sock.setsockopt(zmq.SNDHWM, hwm)
        self.sock.setsockopt(zmq.XPUB_NODROP, 1)  # full subscriber -> zmq.Again, not a silent drop
        self.sock.setsockopt(zmq.XPUB_VERBOSE, 1)  # report every subscription, not just the first
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.bind(address)
        self.pending_drops = 0  # events dropped since the last delivered one
        self.total_drops = 0  # events dropped since start
        self.num_published = 0  # events delivered (to the zmq queues of all subscribers)

    def publish(self, event: StepEvent) -> bool:
        """Send without blocking; True if sent, False if dropped (and counted)."""
        if event.num_dropped_events != self.pending_drops:
            event = msgspec.structs.replace(event, num_dropped_events=self.pending_drops)
        try:
            self.sock.send(encode_event(event), zmq.NOBLOCK)
        except zmq.Again:
            self.pending_drops += 1
            self.total_drops += 1
            return False
        self.pending_drops = 0
        self.num_published += 1
        return True

    def new_subscribers(self) -> int:
        """How many subscriptions arrived since the last call (never blocks)."""
        joined = 0
        while True:
            try:
                msg = self.sock.recv(zmq.NOBLOCK)
            except zmq.Again:
                return joined
            if msg[:1] == b"\x01":
                joined += 1

    def close(self) -> None:
        self.sock.close(linger=0)
