"""The one-port relay of ``serve --processes N`` holds at most ``max_connections`` connections."""

from __future__ import annotations

import socket
import threading
import time

from flight_server.server.runtime.relay import Relay


def _echo(conn: socket.socket) -> None:
    with conn:
        for data in iter(lambda: conn.recv(64), b""):
            conn.sendall(data)


def _echo_backend() -> tuple[socket.socket, int]:
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=_echo, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return server, server.getsockname()[1]


def _echoes(sock: socket.socket) -> bool:
    sock.settimeout(5)
    try:
        sock.sendall(b"ping")
        return sock.recv(4) == b"ping"
    except OSError:
        return False


def test_connections_past_the_bound_are_closed_and_slots_come_back():
    backend, port = _echo_backend()
    relay = Relay("127.0.0.1", 0, max_connections=2)
    relay.set_backend(0, port)
    relay.start()
    try:
        held = [socket.create_connection(("127.0.0.1", relay.port)) for _ in range(2)]
        assert all(_echoes(s) for s in held)
        extra = socket.create_connection(("127.0.0.1", relay.port))
        assert not _echoes(extra)  # closed by the relay: the bound holds
        extra.close()
        held.pop().close()
        deadline = time.monotonic() + 5
        while True:  # the freed slot serves a new connection (its release is asynchronous)
            again = socket.create_connection(("127.0.0.1", relay.port))
            if _echoes(again) or time.monotonic() > deadline:
                break
            again.close()
        assert _echoes(again)
        again.close()
        for s in held:
            s.close()
    finally:
        relay.close()
        backend.close()
