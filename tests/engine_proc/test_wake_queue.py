"""WakeQueue: a thread-to-thread queue whose reader sleeps in a zmq poll beside its sockets."""

import threading

import zmq

from enginetui.core.engine.wake_queue import WakeQueue


def test_the_reader_sleeps_until_a_put_and_gets_every_item_in_order():
    ctx = zmq.Context()
    q = WakeQueue(ctx)
    poller = zmq.Poller()
    poller.register(q.socket, zmq.POLLIN)
    try:
        assert poller.poll(50) == []  # nothing put: the poll times out
        got: list[int] = []
        done = threading.Event()

        def read() -> None:
            while len(got) < 1000:
                poller.poll()
                got.extend(q.drain())
            done.set()

        reader = threading.Thread(target=read)
        reader.start()
        for i in range(1000):  # more than the PAIR socket's 1000 pending wakes: none may be lost
            q.put(i)
        assert done.wait(10.0)
        reader.join()
        assert got == list(range(1000))
        assert q.drain() == [] and poller.poll(50) == []  # every wake was read with its item
    finally:
        q.close()
        ctx.term()


def test_a_put_after_a_drain_wakes_the_reader_again():
    ctx = zmq.Context()
    q = WakeQueue(ctx)
    try:
        q.put("a")
        assert q.socket.poll(1000) and q.drain() == ["a"]
        assert q.socket.poll(0) == 0
        q.put("b")
        assert q.socket.poll(1000) and q.drain() == ["b"]
    finally:
        q.close()
        ctx.term()
