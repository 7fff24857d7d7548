"""One public port for several serving processes: a TCP relay in the supervising process.

Linux gRPC servers can share a port with ``SO_REUSEPORT``, but Arrow Flight's C++ server turns
that option off (``GRPC_ARG_ALLOW_REUSEPORT = 0`` in its server builder) and pyarrow exposes no
hook to turn it back on: a second ``FlightServerBase`` on a bound port fails with "address in
use" (tests/flight_server/server/test_processes.py pins this). So the supervisor owns the public
socket and hands each accepted connection to one serving process (the one with the fewest
relayed connections, round robin among equals), which listens on a private loopback port. Bytes move between the two
sockets with ``splice(2)`` through a pipe, in the kernel; TLS, when configured, passes through
untouched and ends in the serving process.

The kernel balanced ``SO_REUSEPORT`` per connection too, so what a client sees is the same: one
HTTP/2 connection is served by one process, many connections spread over all of them.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import threading

_CHUNK = 1 << 20
_F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ (Python 3.10+ on Linux; spelled out for older stubs)
_SPLICE = hasattr(os, "splice")


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy ``src`` to ``dst`` until end of stream or an error, then end ``dst``'s sending side."""
    try:
        if _SPLICE:
            r, w = os.pipe()
            try:
                with contextlib.suppress(OSError):
                    fcntl.fcntl(w, _F_SETPIPE_SZ, _CHUNK)
                while True:
                    n = os.splice(src.fileno(), w, _CHUNK)
                    if n == 0:
                        break
                    while n > 0:
                        n -= os.splice(r, dst.fileno(), n)
            finally:
                os.close(r)
                os.close(w)
        else:  # pragma: no cover - non-Linux
            buf = bytearray(1 << 16)
            while n := src.recv_into(buf):
                dst.sendall(memoryview(buf)[:n])
    except OSError:  # reset by either side: the other side learns it below
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


class Relay:
    """Listens on ``host:port`` and relays every connection to one of the backends.

    Args:
        host, port: the public address (port 0: any free port; see :attr:`port`).
        max_connections: relayed connections open at once (two threads each); a connection past
            the bound is closed at once, so a flood of idle connections costs no more than this.
    """

    def __init__(self, host: str, port: int, max_connections: int = 1024):
        family = socket.getaddrinfo(host.strip("[]") or None, port, type=socket.SOCK_STREAM,
                                    flags=socket.AI_PASSIVE)[0][0]
        try:
            dualstack = family == socket.AF_INET6 and host in ("::", "[::]") and socket.has_dualstack_ipv6()
            self._sock = socket.create_server((host.strip("[]"), port), family=family, backlog=1024,
                                              dualstack_ipv6=dualstack)
        except OSError as err:
            raise OSError(f"cannot listen on {host}:{port} (address in use?)") from err
        self.port: int = self._sock.getsockname()[1]
        self._backends: dict[int, int] = {}  # slot -> private port
        self._active: dict[int, int] = {}  # slot -> relayed connections open
        self._last: dict[int, int] = {}  # slot -> turn it was last chosen
        self._turn = 0
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._slots = threading.BoundedSemaphore(max_connections)
        self._thread: threading.Thread | None = None

    def set_backend(self, slot: int, port: int | None) -> None:
        """Route new connections to ``127.0.0.1:port`` for ``slot`` (``None``: slot is down)."""
        with self._lock:
            if port is None:
                self._backends.pop(slot, None)
            else:
                self._backends[slot] = port
                self._active.setdefault(slot, 0)

    def _choose(self, tried: set[int]) -> tuple[int, int] | None:
        with self._lock:
            slots = [s for s in self._backends if s not in tried]
            if not slots:
                return None
            # fewest open connections; among equals the one chosen longest ago (round robin)
            slot = min(slots, key=lambda s: (self._active.get(s, 0), self._last.get(s, -1), s))
            self._active[slot] = self._active.get(slot, 0) + 1
            self._turn += 1
            self._last[slot] = self._turn
            return slot, self._backends[slot]

    def _release(self, slot: int) -> None:
        with self._lock:
            self._active[slot] = max(0, self._active.get(slot, 0) - 1)

    def _connect(self) -> tuple[int, socket.socket] | None:
        tried: set[int] = set()
        while (choice := self._choose(tried)) is not None:
            slot, port = choice
            try:
                upstream = socket.create_connection(("127.0.0.1", port), timeout=5)
                upstream.settimeout(None)
                return slot, upstream
            except OSError:  # that process is gone; the supervisor restarts it
                self._release(slot)
                tried.add(slot)
        return None

    def _relay(self, client: socket.socket) -> None:
        chosen = self._connect()
        if chosen is None:
            client.close()
            return
        slot, upstream = chosen
        for s in (client, upstream):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self._open.update((client, upstream))
        back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
        back.start()
        _pump(client, upstream)
        back.join()
        with self._lock:
            self._open.difference_update((client, upstream))
        for s in (client, upstream):
            s.close()
        self._release(slot)

    def _accept_loop(self) -> None:
        while True:
            try:
                client, _ = self._sock.accept()
            except OSError:  # closed
                return
            if not self._slots.acquire(blocking=False):
                client.close()  # past max_connections
                continue
            threading.Thread(target=self._relayed, args=(client,), name="hudi-flight-relay", daemon=True).start()

    def _relayed(self, client: socket.socket) -> None:
        try:
            self._relay(client)
        finally:
            self._slots.release()

    def start(self) -> "Relay":
        self._thread = threading.Thread(target=self._accept_loop, name="hudi-flight-accept", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop accepting and cut every relayed connection."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        with self._lock:
            open_now = list(self._open)
        for s in open_now:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(5)

__all__ = ["Relay"]
