"""The one way this project's HTTP servers open their listening socket (the OpenAI server and the
vLLM watch's proxy).

The socket is made with protocol IPPROTO_TCP, not 0: asyncio turns Nagle's algorithm off
(TCP_NODELAY) on each accepted connection only when the socket says it is TCP; left on, the first
streamed chunk after the response headers waits for the client's delayed ACK, which delays every
first token.
"""

import socket

LISTEN_BACKLOG = 2048  # connections the kernel queues before the server accepts them (uvicorn's default)


def tcp_listener(host: str, port: int) -> socket.socket:
    """A TCP socket listening on host:port (port 0: a free one); raises OSError when it cannot bind."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(LISTEN_BACKLOG)
    return sock
