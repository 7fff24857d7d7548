"""The one-port relay of ``serve --processes N``: bounded connections, and no way for idle,
silent or half-open connections, or running out of descriptors, to lock the port (issue 20)."""

from __future__ import annotations

import contextlib
import errno
import logging
import socket
import threading
import time

from flight_server.server.runtime.relay import Relay
from flight_server.server.security.limits import RelayLimits


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
    relay = Relay("127.0.0.1", 0, RelayLimits(max_connections=2, displace_after_seconds=30))
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


@contextlib.contextmanager
def _relay(**limits):
    backend, port = _echo_backend()
    relay = Relay("127.0.0.1", 0, RelayLimits(**limits))
    relay.set_backend(0, port)
    relay.start()
    try:
        yield relay
    finally:
        relay.close()
        backend.close()


def _closed_by_relay(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except (TimeoutError, socket.timeout):
        return False
    except OSError:
        return True


def test_silent_connections_give_their_place_to_new_ones():
    """A flood of connections that never speak does not lock the port once they are idle a moment."""
    with _relay(max_connections=4, displace_after_seconds=0.2) as relay:
        silent = [socket.create_connection(("127.0.0.1", relay.port)) for _ in range(4)]
        time.sleep(0.4)
        fresh = socket.create_connection(("127.0.0.1", relay.port))
        assert _echoes(fresh)
        assert relay.open_connections() == 4
        assert sum(_closed_by_relay(s, 0.3) for s in silent) == 1
        for s in [*silent, fresh]:
            s.close()


def test_connections_per_peer_are_bounded():
    with _relay(max_connections=100, max_connections_per_peer=2, displace_after_seconds=30) as relay:
        held = [socket.create_connection(("127.0.0.1", relay.port)) for _ in range(2)]
        assert all(_echoes(s) for s in held)
        extra = socket.create_connection(("127.0.0.1", relay.port))
        assert not _echoes(extra)
        for s in [*held, extra]:
            s.close()


def test_unanswered_idle_and_half_open_connections_are_closed():
    with _relay(handshake_seconds=0.3) as relay:  # the echo backend answers only what it is sent
        silent = socket.create_connection(("127.0.0.1", relay.port))
        assert _closed_by_relay(silent, 3)
        silent.close()
    with _relay(idle_seconds=0.3) as relay:
        idle = socket.create_connection(("127.0.0.1", relay.port))
        assert _echoes(idle)
        assert _closed_by_relay(idle, 3)
        idle.close()
    with _relay(half_open_seconds=0.3) as relay:
        half = socket.create_connection(("127.0.0.1", relay.port))
        assert _echoes(half)
        half.shutdown(socket.SHUT_WR)  # the echo backend keeps its side open
        assert _closed_by_relay(half, 3)
        half.close()
        assert _wait_for(lambda: relay.open_connections() == 0)


def _wait_for(condition, seconds: float = 5) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


class _Exhausted:
    """A listening socket whose first ``failures`` accepts fail as if out of descriptors."""

    def __init__(self, sock: socket.socket, failures: int):
        self._sock, self.failures = sock, failures

    def accept(self):
        if self.failures:
            self.failures -= 1
            raise OSError(errno.EMFILE, "Too many open files")
        return self._sock.accept()

    def __getattr__(self, name):
        return getattr(self._sock, name)


def test_running_out_of_descriptors_does_not_stop_accepting(caplog):
    backend, port = _echo_backend()
    relay = Relay("127.0.0.1", 0, RelayLimits(max_connections=8))
    relay.set_backend(0, port)
    relay._sock = _Exhausted(relay._sock, failures=5)
    try:
        with caplog.at_level(logging.WARNING, logger="flight_server.server.runtime.relay"):
            relay.start()
            client = socket.create_connection(("127.0.0.1", relay.port))
            assert _echoes(client)  # accepted after the failures, with a pause between them
        assert relay._sock.failures == 0
        assert any("accept failed" in r.getMessage() for r in caplog.records)
        client.close()
    finally:
        relay.close()
        backend.close()


def test_max_connections_fits_the_descriptor_limit():
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    relay = Relay("127.0.0.1", 0, RelayLimits(max_connections=10**9))
    try:
        now_soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        assert now_soft >= soft and relay.limits.max_connections * 6 < now_soft
    finally:
        relay.close()
