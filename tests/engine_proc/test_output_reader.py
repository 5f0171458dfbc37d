"""AsyncClient's output reader: `recv(NOBLOCK)`, and on zmq.Again a wait on the socket's FD from the loop."""

import asyncio
import threading

import pytest
import uvloop
import zmq

from enginetui.core.engine.core_client import _OutputReader

LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


async def _read(reader: _OutputReader, count: int) -> list[bytes]:
    """`count` messages, read as AsyncClient reads them."""
    got: list[bytes] = []
    while len(got) < count:
        try:
            got.append(reader.sock.recv(zmq.NOBLOCK))
        except zmq.Again:
            await reader.readable(5.0)
    return got


@pytest.mark.parametrize("loop_name", LOOPS)
def test_every_message_sent_while_the_reader_waits_arrives_in_order_and_a_quiet_wait_times_out(loop_name):
    ctx = zmq.Context()
    pull, push = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    pull.bind("inproc://out")
    push.connect("inproc://out")
    reader = _OutputReader(pull)
    sent = [str(i).encode() for i in range(2000)]

    def send() -> None:
        for i, msg in enumerate(sent):
            push.send(msg)
            if i % 100 == 0:
                threading.Event().wait(0.002)  # let the reader catch up and wait again

    async def main() -> tuple[bool, list[bytes], bool]:
        with pytest.raises(zmq.Again):
            pull.recv(zmq.NOBLOCK)
        quiet = await reader.readable(0.05)
        sender = threading.Thread(target=send)
        sender.start()
        got = await asyncio.wait_for(_read(reader, len(sent)), 30)
        sender.join()
        with pytest.raises(zmq.Again):
            pull.recv(zmq.NOBLOCK)
        return quiet, got, await reader.readable(0.05)

    loop = LOOPS[loop_name]()
    try:
        quiet, got, quiet_after = loop.run_until_complete(main())
        reader.close(linger=0)  # removes its reader from the loop, then closes the socket
        loop.run_until_complete(asyncio.sleep(0.01))  # the loop runs on without the closed FD
    finally:
        loop.close()
        push.close(linger=0)
        ctx.term()
    assert quiet is False and quiet_after is False
    assert got == sent
