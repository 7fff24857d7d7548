"""The public port: a TCP relay in front of the serving process(es), in the process that owns the
port (the supervisor of ``serve --processes N``, else the one serving process itself).

A single process is fronted too: the relay is the only place where a request's gRPC messages
can be bounded before gRPC buffers them (below).

Linux gRPC servers can share a port with ``SO_REUSEPORT``, but Arrow Flight's C++ server turns
that option off (``GRPC_ARG_ALLOW_REUSEPORT = 0`` in its server builder) and pyarrow exposes no
hook to turn it back on: a second ``FlightServerBase`` on a bound port fails with "address in
use" (tests/flight_server/server/runtime/test_processes.py pins this). So the supervisor owns the public
socket and hands each accepted connection to one serving process (the one with the fewest
relayed connections, round robin among equals), which listens on a private loopback port. One
thread moves the bytes of every connection (``relay_loop``: the way back in the kernel with
``splice(2)``). TLS, when configured, ends here (``tls``: the processes behind listen in cleartext
on loopback, so the request checks below see TLS clients' requests too), except where clients
reach the processes' own ports as well (``--process-endpoints``): then it passes through
untouched and ends in the serving process.

The kernel balanced ``SO_REUSEPORT`` per connection too, so what a client sees is the same: one
HTTP/2 connection is served by one process, many connections spread over all of them.

A hostile client must not lock the port (:class:`RelayLimits`):

* connections are bounded in all and per peer host; a connection past a bound displaces the one
  idle longest (one that never got an answer from its process first: a slowloris), if that one
  has been idle a moment, else it is closed at once;
* a connection whose serving process has not answered (HTTP/2 settings, TLS server hello)
  within ``handshake_seconds``, idle in both directions for ``idle_seconds``, or half closed for
  ``half_open_seconds`` is closed;
* on a cleartext connection a gRPC message over ``max_message_bytes`` (twice ``max_body_bytes``
  and some framing) cuts the connection before its body reaches a process (``h2_guard``: pyarrow
  lets no Python code bound gRPC's receive size, so this is the only place it can be checked
  before the message is buffered), and so does a message past the bytes in progress allowed on
  one connection (``max_body_bytes_per_connection``), on one peer host's connections
  (``max_body_bytes_per_peer``) or on all of them (``body_memory_bytes``);
* running out of file descriptors (EMFILE) while accepting is logged, relieved by displacing
  an idle connection, and retried with a growing pause: the accept loop never dies. At start the
  soft descriptor limit is raised to the hard one, and ``max_connections`` is lowered to what
  the descriptors allow (four per connection: two sockets, one pipe).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import resource
import socket
import ssl
import threading
import time

from flight_server.server.runtime.h2_guard import BodyBudget, H2Guard
from flight_server.server.runtime.relay_loop import Link, RelayLoop
from flight_server.server.security.limits import RelayLimits

log = logging.getLogger(__name__)
FDS_PER_CONNECTION = 4  # client and upstream sockets, one pipe (two descriptors) for the way back
RESERVED_FDS = 64  # for the supervisor itself: logs, pipes to the processes, the catalog
#: accept() errors that mean "out of something for now", not "the socket is closed"
_TRANSIENT = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM, errno.ECONNABORTED, errno.EPERM,
              errno.EPROTO, errno.EINTR, errno.EAGAIN}


def descriptor_capacity() -> int:
    """Connections the file descriptor limit allows, after raising the soft limit to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
    if soft == resource.RLIM_INFINITY:
        return 1 << 20
    return max(1, (soft - RESERVED_FDS) // FDS_PER_CONNECTION)


class Relay:
    """Listens on ``host:port`` and relays every connection to one of the backends.

    Args:
        host, port: the public address (port 0: any free port; see :attr:`port`).
        limits: the bounds (default: :class:`RelayLimits`'s).
        backend_host: where the backends listen (their ports: :meth:`set_backend`).
        tls: end the clients' TLS here with this context (the backends listen in cleartext), so
            the guard sees their requests too; ``None``: relay bytes as they come (TLS included).
    """

    def __init__(self, host: str, port: int, limits: RelayLimits | None = None, backend_host: str = "127.0.0.1",
                 tls: ssl.SSLContext | None = None):
        limits = limits or RelayLimits()
        capacity = descriptor_capacity()
        if limits.max_connections > capacity:
            log.warning("max_connections %d lowered to %d: the file descriptor limit allows no more",
                        limits.max_connections, capacity)
            limits = RelayLimits(**{**limits.__dict__, "max_connections": capacity})
        self.limits = limits
        family = socket.getaddrinfo(host.strip("[]") or None, port, type=socket.SOCK_STREAM,
                                    flags=socket.AI_PASSIVE)[0][0]
        try:
            dualstack = family == socket.AF_INET6 and host in ("::", "[::]") and socket.has_dualstack_ipv6()
            self._sock = socket.create_server((host.strip("[]"), port), family=family, backlog=1024,
                                              dualstack_ipv6=dualstack)
        except OSError as err:
            raise OSError(f"cannot listen on {host}:{port} (address in use?)") from err
        self.port: int = self._sock.getsockname()[1]
        self._backend_host = backend_host
        self._tls = tls
        self._backends: dict[int, int] = {}  # slot -> private port
        self._active: dict[int, int] = {}  # slot -> relayed connections open
        self._last: dict[int, int] = {}  # slot -> turn it was last chosen
        self._turn = 0
        self._lock = threading.Lock()
        self._links: set[Link] = set()
        self._per_peer: dict[str, int] = {}
        self._closing = threading.Event()
        self._loop = RelayLoop()
        # request messages in progress: per peer host, all connections
        self._bodies = BodyBudget(limits.body_memory_bytes, limits.max_body_bytes_per_peer)
        self._threads: list[threading.Thread] = []
        self._last_complaint = 0.0

    def set_backend(self, slot: int, port: int | None) -> None:
        """Route new connections to ``backend_host:port`` for ``slot`` (``None``: slot is down)."""
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
                upstream = socket.create_connection((self._backend_host, port), timeout=5)
                upstream.settimeout(None)
                return slot, upstream
            except OSError:  # that process is gone (the supervisor restarts it), or no descriptor left
                self._release(slot)
                tried.add(slot)
        return None

    # -- admission -------------------------------------------------------------------------------
    def open_connections(self) -> int:
        with self._lock:
            return len(self._links)

    def _victim(self, peer: str | None) -> Link | None:
        """The connection to displace (of ``peer`` only, when given): never answered first, then
        idle longest; ``None`` when every candidate moved bytes a moment ago."""
        now = time.monotonic()
        grace = self.limits.displace_after_seconds
        candidates = [lk for lk in self._links if (peer is None or lk.peer == peer) and now - lk.last >= grace]
        if not candidates:
            return None
        return min(candidates, key=lambda lk: (lk.answered, lk.last))

    def _drop(self, link: Link) -> bool:
        """Forget ``link`` (under the lock); ``False`` when it was forgotten already."""
        if link not in self._links:
            return False
        self._links.discard(link)
        left = self._per_peer.get(link.peer, 1) - 1
        if left > 0:
            self._per_peer[link.peer] = left
        else:
            self._per_peer.pop(link.peer, None)
        return True

    def _admit(self, link: Link) -> bool:
        limits = self.limits
        with self._lock:
            for bound, full, peer in (
                (limits.max_connections_per_peer, self._per_peer.get(link.peer, 0), link.peer),
                (limits.max_connections, len(self._links), None),
            ):
                if bound and full >= bound:
                    victim = self._victim(peer)
                    if victim is None:
                        return False
                    self._drop(victim)
                    victim.cut()
            self._links.add(link)
            self._per_peer[link.peer] = self._per_peer.get(link.peer, 0) + 1
            return True

    # -- relaying --------------------------------------------------------------------------------
    def _relayed(self, link: Link) -> None:
        """Connect ``link`` to a serving process (on a thread of its own: connecting may take a
        moment) and hand both sockets to the loop."""
        try:
            if self._tls is not None:
                link.client = self._handshake(link.client)
            chosen = self._connect()
            if chosen is not None:
                slot, upstream = chosen
                link.upstream = upstream
                guard = self._guard(link.peer)
                try:
                    if link in self._links:  # not displaced or closed meanwhile
                        self._loop.add(link, upstream, guard, lambda: self._closed(link, slot, guard))
                        return
                except OSError as err:  # e.g. no descriptor left for its pipe
                    log.debug("relayed connection ended: %s", err)
                upstream.close()
                self._release(slot)
        except OSError as err:
            log.debug("relayed connection ended: %s", err)
        self._closed(link, None)

    def _handshake(self, client: socket.socket) -> ssl.SSLSocket:
        """The client's TLS handshake, on this connection's own thread, within ``handshake_seconds``.

        Raises:
            OSError: the handshake failed or took too long (``ssl.SSLError`` is one).
        """
        assert self._tls is not None
        client.settimeout(self.limits.handshake_seconds)
        try:
            wrapped = self._tls.wrap_socket(client, server_side=True)
        except OSError:
            client.close()
            raise
        wrapped.settimeout(None)
        return wrapped

    def _guard(self, peer: str) -> H2Guard | None:
        """The front check of the request messages of one new connection of ``peer`` (``None``:
        unbounded)."""
        limits = self.limits
        if not limits.max_message_bytes:
            return None
        return H2Guard(limits.max_message_bytes, limits.max_body_bytes_per_connection, self._bodies, peer)

    def _closed(self, link: Link, slot: int | None, guard: H2Guard | None = None) -> None:
        """``link`` is over: forget it, free its process's slot and its messages in progress,
        close the client's socket."""
        if guard is not None:  # on the loop's thread, the one that counts the budget
            guard.release()
        if slot is not None:
            self._release(slot)
        with self._lock:
            self._drop(link)
        link.client.close()

    def _accept_loop(self) -> None:
        pause = 0.01
        while not self._closing.is_set():
            try:
                client, address = self._sock.accept()
            except OSError as err:
                if self._closing.is_set() or err.errno not in _TRANSIENT:
                    if not self._closing.is_set():
                        log.error("relay: accept failed (%s); no longer accepting", err)
                    return
                self._out_of_resources(err, pause)
                pause = min(1.0, 2 * pause)
                continue
            pause = 0.01
            link = Link(client, str(address[0]))
            if not self._admit(link):
                client.close()  # past a bound, and nobody idle to displace
                continue
            try:
                threading.Thread(target=self._relayed, args=(link,), name="hudi-flight-connect", daemon=True).start()
            except RuntimeError:  # no thread left: as if out of descriptors
                with self._lock:
                    self._drop(link)
                client.close()

    def _out_of_resources(self, err: OSError, pause: float) -> None:
        """Accepting failed for want of descriptors or memory: make room and pause."""
        now = time.monotonic()
        if now - self._last_complaint > 10:
            self._last_complaint = now
            log.warning("relay: accept failed (%s); displacing an idle connection and retrying", err)
        if err.errno in (errno.EMFILE, errno.ENFILE):
            with self._lock:
                victim = self._victim(None)
                if victim is not None:
                    self._drop(victim)
            if victim is not None:
                victim.cut()
        self._closing.wait(pause)

    def _reap_loop(self) -> None:
        """Close connections without a handshake, idle or half open for too long."""
        tick = max(0.05, min(1.0, self.limits.handshake_seconds / 4, self.limits.half_open_seconds / 4))
        while not self._closing.wait(tick):
            now = time.monotonic()
            with self._lock:
                expired = [(lk, why) for lk in self._links if (why := lk.expired(now, self.limits))]
                for lk, _ in expired:
                    self._drop(lk)
            for lk, why in expired:
                log.debug("relay: closing a connection of %s (%s)", lk.peer, why)
                lk.cut()

    def start(self) -> "Relay":
        self._loop.start()
        for target, name in ((self._accept_loop, "hudi-flight-accept"), (self._reap_loop, "hudi-flight-reaper")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def close(self) -> None:
        """Stop accepting and cut every relayed connection."""
        self._closing.set()
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        with self._lock:
            open_now = list(self._links)
        for link in open_now:
            link.cut()
        for thread in self._threads:
            thread.join(5)
        self._loop.stop()


__all__ = ["FDS_PER_CONNECTION", "Relay", "descriptor_capacity"]
