"""A queue between two threads whose reader waits in a zmq poll, beside its sockets.

A `queue.Queue` reader can wait only on the queue, so a thread that must also notice a socket
(EngineCore's output thread: a new event subscriber; its input thread: the order to stop) would have
to wake on a timer to look, and on a machine whose cores the model's threads fill each wake stalls a
compute thread at its next barrier. Here the writer also sends an empty message on an inproc PAIR
socket, and the reader polls that socket with its others, so an idle reader sleeps until there is
something to do.

One writer thread and one reader thread (zmq sockets are not thread-safe): the thread that
`put`s and the thread that polls `socket` and calls `drain`.
"""

import itertools
from collections import deque
from typing import Any

import zmq

_names = itertools.count()  # distinct inproc addresses for the queues of one process


class WakeQueue:
    """Items in order, and a socket that is readable while items may be waiting."""

    def __init__(self, ctx: zmq.Context) -> None:
        address = f"inproc://enginetui-wake-{next(_names)}"
        self.socket = ctx.socket(zmq.PAIR)  # the reader's: register it in the reader's zmq.Poller
        self.socket.bind(address)
        self._writer = ctx.socket(zmq.PAIR)  # the writer's: one empty message per put
        self._writer.connect(address)
        self._items: deque = deque()  # put, not yet drained (deque appends and pops are thread-safe)

    def put(self, item: Any) -> None:
        """Add an item and wake the reader (from the writer thread)."""
        self._items.append(item)
        try:
            self._writer.send(b"", zmq.NOBLOCK)
        except zmq.Again:  # the reader has a thousand wakes pending already: it will drain this too
            pass

    def drain(self) -> list[Any]:
        """Every item put so far, oldest first (from the reader thread, after `socket` polled readable).
        The wakes are read first, so an item put meanwhile leaves its wake for the next poll."""
        while True:
            try:
                self.socket.recv(zmq.NOBLOCK)
            except zmq.Again:
                break
        items = []
        while self._items:
            items.append(self._items.popleft())
        return items

    def close(self) -> None:
        """Close both sockets (after both threads are done with them)."""
        self._writer.close(linger=0)
        self.socket.close(linger=0)
