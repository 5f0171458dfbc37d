"""The server's socket listens from the moment it is made: `enginetui serve` prints its URL before
uvicorn runs, and a client that connects in between must wait, not be refused."""

import socket

from enginetui.core.entrypoints.openai.api_server import listen_socket


def test_a_client_that_connects_before_the_server_runs_waits_instead_of_being_refused():
    sock = listen_socket("127.0.0.1", 0)
    try:
        port = sock.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5):  # nothing accepts yet: it is queued
            conn, _ = sock.accept()  # what uvicorn does once it runs
            conn.close()
    finally:
        sock.close()

