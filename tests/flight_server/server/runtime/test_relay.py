"""The one-port relay of ``serve --processes N``: bounded connections, and no way for idle,
silent or half-open connections, or running out of descriptors, to lock the port (issue 20)."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from flight_server.server.runtime.relay import FDS_PER_CONNECTION, Relay
from flight_server.server.runtime.relay_loop import Link, RelayLoop
from flight_server.server.security.limits import RelayLimits


def _echo(conn: socket.socket) -> None:
    with conn:
        for data in iter(lambda: conn.recv(64), b""):
            conn.sendall(data)


def _backend(handle: Callable[[socket.socket], None]) -> tuple[socket.socket, int]:
    """A loopback server that runs ``handle`` on a thread of its own per accepted connection."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return server, server.getsockname()[1]


def _echo_backend() -> tuple[socket.socket, int]:
    return _backend(_echo)


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
        assert now_soft >= soft and relay.limits.max_connections * FDS_PER_CONNECTION < now_soft
    finally:
        relay.close()


def _digest_backend(reply_bytes: int) -> tuple[socket.socket, int]:
    """A backend that reads a connection to its end, then answers the SHA-256 of what it read
    followed by ``reply_bytes`` bytes of a known pattern, and closes."""

    def answer(conn: socket.socket) -> None:
        with conn:
            digest = hashlib.sha256()
            for data in iter(lambda: conn.recv(1 << 16), b""):
                digest.update(data)
            conn.sendall(digest.digest() + _pattern(reply_bytes))

    return _backend(answer)


def _pattern(n: int) -> bytes:
    return (bytes(range(251)) * (n // 251 + 1))[:n]


def _upload_and_read(port: int, upload: bytes, reply_bytes: int, slow: bool) -> tuple[bytes, bytes]:
    """Send ``upload``, end the sending half, read the answer to its end (a slow reader when
    ``slow``: the relay must hold back, not drop or reorder)."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(upload)
        sock.shutdown(socket.SHUT_WR)  # half close: the answer still comes back
        got = bytearray()
        while data := sock.recv(1 << 12 if slow else 1 << 16):
            got += data
            if slow and len(got) < (1 << 20):
                time.sleep(0.001)
    return bytes(got[:32]), bytes(got[32:])


def test_bytes_cross_intact_both_ways_with_slow_readers_and_half_closes():
    """Megabytes each way over several connections at once, one of them read slowly: every
    byte arrives, in order, and an answer sent after the client's half close comes back."""
    backend, port = _digest_backend(reply_bytes=3 << 20)
    relay = Relay("127.0.0.1", 0, RelayLimits(max_message_bytes=1 << 20))  # not HTTP/2: the guard steps aside
    relay.set_backend(0, port)
    relay.start()
    try:
        uploads = [os.urandom((2 << 20) + i) for i in range(4)]
        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda i: _upload_and_read(relay.port, uploads[i], 3 << 20, slow=i == 0),
                                    range(4)))
        for upload, (digest, reply) in zip(uploads, answers):
            assert digest == hashlib.sha256(upload).digest()
            assert reply == _pattern(3 << 20)
        assert _wait_for(lambda: relay.open_connections() == 0)
    finally:
        relay.close()
        backend.close()


def _tcp_pair(buffer_bytes: int) -> tuple[socket.socket, socket.socket]:
    """Two ends of a loopback TCP connection with small buffers (so writes fill them quickly)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        near = socket.socket()
        for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
            near.setsockopt(socket.SOL_SOCKET, option, buffer_bytes)
        near.connect(listener.getsockname())
        far, _ = listener.accept()
    for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
        far.setsockopt(socket.SOL_SOCKET, option, buffer_bytes)
    return near, far


def test_the_loop_holds_back_for_a_slow_reader_in_both_directions():
    """Destinations that take little at a time (small socket buffers, slow readers): the loop
    keeps what it read, waits until they take more, and loses or reorders nothing."""
    client_app, client_side = _tcp_pair(1 << 16)
    upstream_side, backend_app = _tcp_pair(1 << 16)
    closed = threading.Event()
    loop = RelayLoop()
    loop.start()
    try:
        loop.add(Link(client_side, "127.0.0.1"), upstream_side, None, closed.set)
        up, down = os.urandom(2 << 20), os.urandom(2 << 20)

        def send_and_end(sock: socket.socket, data: bytes) -> None:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)

        def read_slowly(sock: socket.socket) -> bytes:
            sock.settimeout(20)
            got = bytearray()
            while data := sock.recv(1 << 14):
                got += data
                if len(got) < (256 << 10):
                    time.sleep(0.001)
            return bytes(got)

        with ThreadPoolExecutor(4) as pool:
            sent = [pool.submit(send_and_end, client_app, up), pool.submit(send_and_end, backend_app, down)]
            at_backend, at_client = pool.submit(read_slowly, backend_app), pool.submit(read_slowly, client_app)
            assert at_backend.result() == up and at_client.result() == down
            for future in sent:
                future.result()
        assert closed.wait(5)  # both directions ended: the loop closed the connection
    finally:
        loop.stop()
        for s in (client_app, backend_app, client_side):
            s.close()
