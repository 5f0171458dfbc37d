"""The server's socket listens from the moment it is made: `enginetui serve` prints its URL before
uvicorn runs, and a client that connects in between must wait, not be refused. Both HTTP servers
(ours and the vLLM watch's proxy) send streamed chunks at once (TCP_NODELAY)."""

import asyncio
import socket

import pytest

from enginetui.core.entrypoints.openai.api_server import listen_socket
from enginetui.vllm_watch.proxy import listen as proxy_listen


def test_a_client_that_connects_before_the_server_runs_waits_instead_of_being_refused():
    sock = listen_socket("127.0.0.1", 0)
    try:
        port = sock.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5):  # nothing accepts yet: it is queued
            conn, _ = sock.accept()  # what uvicorn does once it runs
            conn.close()
    finally:
        sock.close()


@pytest.mark.parametrize("listen", [listen_socket, proxy_listen], ids=["server", "vllm-watch proxy"])
def test_the_servers_send_each_chunk_at_once_nagle_off(listen):
    """asyncio sets TCP_NODELAY on an accepted connection only when the listening socket says it is
    TCP (protocol IPPROTO_TCP, not 0); with Nagle on, a stream's first chunk after the headers waited
    for the client's delayed ACK (about 40 ms more time to first token)."""
    sock = listen("127.0.0.1", 0)
    assert sock.proto == socket.IPPROTO_TCP

    async def accepted_nodelay() -> int:
        seen = asyncio.get_running_loop().create_future()

        async def on_connect(reader, writer):
            seen.set_result(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(on_connect, sock=sock)  # as uvicorn serves a given socket
        async with server:
            _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
            value = await asyncio.wait_for(seen, 10)
            writer.close()
            return value

    assert asyncio.run(accepted_nodelay()) != 0
