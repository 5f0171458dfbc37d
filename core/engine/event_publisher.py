"""Publishes StepEvents on a PUB socket without ever blocking the engine.

The socket is an XPUB with a small SNDHWM per subscriber: when one subscriber's queue is full,
zmq drops that subscriber's copy of the event and every other subscriber still gets it.
Subscribers count what they missed from the gaps in step numbers (events.MissedEvents).
XPUB also tells the publisher when a subscriber joins, so EngineCore can greet it with a
snapshot (a late subscriber can draw the full state at once).

Owned by one thread (EngineCore's output thread); zmq sockets are not thread-safe.
"""

import zmq

from enginetui.core.engine.events import StepEvent, encode_event

PUB_SNDHWM = 64  # events queued per subscriber before that subscriber's copies are dropped


class EventPublisher:
    """The engine side of the step-event stream."""

    def __init__(self, ctx: zmq.Context, address: str, hwm: int = PUB_SNDHWM) -> None:
        self.sock = ctx.socket(zmq.XPUB)  # bound; subscribers connect
        self.sock.setsockopt(zmq.SNDHWM, hwm)
        self.sock.setsockopt(zmq.XPUB_VERBOSE, 1)  # report every subscription, not just the first
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.bind(address)

    def publish(self, event: StepEvent) -> None:
        """Send without blocking (a full subscriber loses this event, the others do not)."""
        # Reading EVENTS makes zmq take in the readers' pending "consumed" credits first; without
        # it a reader that keeps up can look full, since send() takes them in only now and then.
        self.sock.getsockopt(zmq.EVENTS)
        self.sock.send(encode_event(event), zmq.NOBLOCK)

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
