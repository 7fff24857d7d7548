"""The relay's data path: one thread moves the bytes of every relayed connection.

A thread per direction of every connection (what the relay had first) pays a thread wake-up, a
GIL hand-over and a context switch per read; a point query is about six reads (two requests,
their answers, HTTP/2 window and ping frames), which cost more than the relay's own work. Here
one thread waits on every socket at once (``epoll``) and moves whatever is ready, so under load
one wake-up serves many reads:

* server to client, bytes move in the kernel (``splice(2)`` through a pipe; user space off Linux,
  and on a connection whose TLS the relay ends: they are encrypted here);
* client to server, bytes are read once into a buffer the loop owns (decrypted, when the relay
  ends TLS), shown to the connection's :class:`~flight_server.server.runtime.h2_guard.H2Guard`
  in place and sent on from there.

A direction whose destination cannot take more (a slow reader) keeps what it read and stops
reading its source until the destination is writable again, so the relay never holds more than
one read per direction. End of stream in one direction ends the other side's sending half (half
close, as TCP has it); a connection is closed once both directions ended, on any error, or when
another thread cuts it (:meth:`Link.cut`: the loop sees both sockets end).
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import logging
import os
import select
import socket
import ssl
import threading
import time
from typing import Callable

from flight_server.server.runtime.h2_guard import H2Guard, MessageTooLarge
from flight_server.server.security.limits import RelayLimits

log = logging.getLogger("flight_server.server.runtime.relay")  # the relay's messages, one logger
_CHUNK = 1 << 20  # bytes one splice moves at most (and the pipe's size)
_READ = 1 << 18  # bytes one read of the client direction takes at most
_F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ (Python 3.10+ on Linux; spelled out for older stubs)
_SPLICE = hasattr(os, "splice")
_NONBLOCK = getattr(os, "SPLICE_F_NONBLOCK", 0)
_IN, _OUT = select.EPOLLIN, select.EPOLLOUT
_READ_EVENTS = select.EPOLLIN | select.EPOLLHUP | select.EPOLLERR  # an end or an error shows in a read
_WRITE_EVENTS = select.EPOLLOUT | select.EPOLLHUP | select.EPOLLERR
#: "nothing to move now": a plain socket's, and a TLS socket's (whose record is not complete yet)
_WOULD_BLOCK = (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError)


class Link:
    """One relayed connection and what the relay knows of its traffic (read by the reaper and
    the admission of new connections, on other threads)."""

    def __init__(self, client: socket.socket, peer: str):
        self.client = client
        self.upstream: socket.socket | None = None
        self.peer = peer
        self.started = self.last = time.monotonic()
        self.answered = False  # the serving process has sent bytes
        self.half_closed: float | None = None

    def moved(self, from_upstream: bool) -> None:
        self.last = time.monotonic()
        if from_upstream:
            self.answered = True

    def ended_one_way(self) -> None:
        if self.half_closed is None:
            self.half_closed = time.monotonic()

    def expired(self, now: float, limits: RelayLimits) -> str | None:
        """Why the connection must be closed now (``None``: it may stay)."""
        if not self.answered and now - self.started > limits.handshake_seconds:
            return "no handshake"
        if now - self.last > limits.idle_seconds:
            return "idle"
        if self.half_closed is not None and now - self.half_closed > limits.half_open_seconds:
            return "half open"
        return None

    def cut(self) -> None:
        """End both sockets (from any thread): the loop sees them end and closes the connection."""
        for s in (self.client, self.upstream):
            if s is not None:
                with contextlib.suppress(OSError):  # TCP's own (a TLS socket's would drop its state
                    socket.socket.shutdown(s, socket.SHUT_RDWR)  # under the loop's feet)


class _Flow:
    """One direction of a relayed connection: what was read and not yet written, and whether
    its source ended."""

    __slots__ = ("src", "dst", "dst_fd", "link", "from_upstream", "guard", "pipe", "held", "pending",
                 "source_ended", "ended")

    def __init__(self, src: socket.socket, dst: socket.socket, link: Link, from_upstream: bool,
                 guard: H2Guard | None, pipe: tuple[int, int] | None):
        self.src, self.dst, self.dst_fd, self.link = src, dst, dst.fileno(), link
        self.from_upstream = from_upstream
        self.guard = guard
        self.pipe = pipe  # (read end, write end): bytes move in the kernel
        self.held = 0  # bytes in the pipe not yet written
        self.pending: bytes | memoryview = b""  # bytes read into user space not yet written
        self.source_ended = False
        self.ended = False  # source ended and everything written

    def wants_read(self) -> bool:
        return not (self.source_ended or self.held or self.pending)

    def wants_write(self) -> bool:
        return bool(self.held or self.pending)

    def read(self, view: memoryview) -> bool:
        """Move what the source has (``view``: the loop's buffer), as far as the destination takes
        it; whether the flow now waits for something else (to write, or nothing: its source ended)."""
        try:
            if self.pipe is not None:
                n = os.splice(self.src.fileno(), self.pipe[1], _CHUNK, flags=_NONBLOCK)
            else:
                n = self.src.recv_into(view)
        except _WOULD_BLOCK:
            return False
        if not n:
            self.source_ended = True
        else:
            self.link.moved(self.from_upstream)
            if self.pipe is not None:
                self.held = n
            else:
                if self.guard is not None:
                    self.guard.feed(view[:n])
                self.pending = view[:n]
        self.write()
        return self.source_ended or self.wants_write()

    def write(self) -> None:
        """Write what is held until done or the destination would block; end the destination's
        sending half once the source ended and nothing is left."""
        try:
            while self.held:
                self.held -= os.splice(self.pipe[0], self.dst_fd, self.held, flags=_NONBLOCK)  # type: ignore[index]
            while self.pending:
                self.pending = self.pending[self.dst.send(self.pending):]
        except _WOULD_BLOCK:
            if isinstance(self.pending, memoryview):  # the loop's buffer is reused by the next read
                self.pending = bytes(self.pending)  # (a TLS write is retried with the same bytes)
            return
        if self.source_ended and not self.ended:
            self.ended = True
            self.link.ended_one_way()
            with contextlib.suppress(OSError):
                # the TCP half close (SSLSocket.shutdown would also drop its TLS state, and with
                # it the other direction)
                socket.socket.shutdown(self.dst, socket.SHUT_WR)

    def buffered(self) -> bool:
        """Whether the source holds decrypted bytes epoll cannot see (the rest of a TLS record)."""
        return isinstance(self.src, ssl.SSLSocket) and self.src.pending() > 0


class _Pair:
    """A relayed connection in the loop: both directions and what each socket waits for."""

    def __init__(self, link: Link, upstream: socket.socket, guard: H2Guard | None, on_close: Callable[[], None]):
        self.link = link
        self.client, self.upstream = link.client, upstream
        self.on_close = on_close
        self.pipe: tuple[int, int] | None = None
        if _SPLICE and not isinstance(link.client, ssl.SSLSocket):  # TLS is written in user space
            self.pipe = os.pipe()
            with contextlib.suppress(OSError):
                fcntl.fcntl(self.pipe[1], _F_SETPIPE_SZ, _CHUNK)
            for fd in self.pipe:
                os.set_blocking(fd, False)
        self.up = _Flow(self.client, upstream, link, False, guard, None)
        self.down = _Flow(upstream, self.client, link, True, None, self.pipe)
        self.fds = (self.client.fileno(), upstream.fileno())
        self.masks = [0, 0]  # epoll events registered, client's then upstream's

    def wanted(self) -> tuple[int, int]:
        """The events each socket waits for: reading its way out, writing its way in."""
        up, down = self.up, self.down
        return ((_IN if up.wants_read() else 0) | (_OUT if down.wants_write() else 0),
                (_IN if down.wants_read() else 0) | (_OUT if up.wants_write() else 0))

    def ready(self, client_side: bool, events: int, view: memoryview) -> bool:
        """Move what one socket is ready for; whether what the sockets wait for may have changed
        (not when a read was written on at once: the common case, with nothing to re-register)."""
        out, into = (self.up, self.down) if client_side else (self.down, self.up)
        changed = False
        if events & _WRITE_EVENTS and into.wants_write():
            into.write()
            changed = True
        if events & _READ_EVENTS and out.wants_read():
            changed = out.read(view) or changed
            while out.wants_read() and out.buffered():
                changed = out.read(view) or changed
        return changed

    @property
    def done(self) -> bool:
        return self.up.ended and self.down.ended

    def close_pipe(self) -> None:
        for fd in self.pipe or ():
            with contextlib.suppress(OSError):
                os.close(fd)

    def close(self) -> None:
        self.close_pipe()
        self.upstream.close()
        self.on_close()


class RelayLoop:
    """The thread that moves the bytes of every relayed connection (:meth:`add` from any thread)."""

    def __init__(self) -> None:
        self._epoll = select.epoll()
        self._wake_r, self._wake_w = socket.socketpair()
        for s in (self._wake_r, self._wake_w):
            s.setblocking(False)
        self._epoll.register(self._wake_r.fileno(), _IN)
        self._sides: dict[int, tuple[_Pair, bool]] = {}  # registered descriptor -> (pair, client side?)
        self._added: collections.deque[_Pair] = collections.deque()
        self._pairs: set[_Pair] = set()
        self._view = memoryview(bytearray(_READ))
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="hudi-flight-relay", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def add(self, link: Link, upstream: socket.socket, guard: H2Guard | None, on_close: Callable[[], None]) -> None:
        """Relay ``link``'s client to ``upstream`` until either ends; ``on_close`` runs (on the
        loop's thread) once the connection is closed, after ``upstream`` is.

        Raises:
            OSError: no descriptor left for the connection's pipe (nothing was taken over).
        """
        pair = _Pair(link, upstream, guard, on_close)
        try:
            for s in (link.client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                s.setblocking(False)
        except OSError:
            pair.close_pipe()
            raise
        self._added.append(pair)
        self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # full: a wake-up is pending anyway
            self._wake_w.send(b"\0")

    def stop(self) -> None:
        """Close every connection and end the thread."""
        self._stopping = True
        self._wake()
        if self._thread.is_alive():
            self._thread.join(5)
        self._epoll.close()
        self._wake_r.close()
        self._wake_w.close()

    def _run(self) -> None:
        sides, view = self._sides, self._view
        while not self._stopping:
            for fd, events in self._epoll.poll():
                side = sides.get(fd)
                if side is None:  # the wake-up socket
                    with contextlib.suppress(OSError):
                        self._wake_r.recv(4096)
                else:
                    self._step(side[0], side[1], events, view)
            while self._added:
                pair = self._added.popleft()
                self._pairs.add(pair)
                self._step(pair, True, 0, view)
        for pair in [*self._pairs, *self._added]:
            self._close(pair)

    def _step(self, pair: _Pair, client_side: bool, events: int, view: memoryview) -> None:
        """Move what one of ``pair``'s sockets is ready for, then close ``pair`` or update what
        its sockets wait for."""
        if pair not in self._pairs:  # closed earlier in this round
            return
        try:
            if events and not pair.ready(client_side, events, view):
                return
            if not pair.done:
                for i, mask in enumerate(pair.wanted()):
                    if mask != pair.masks[i]:
                        self._interest(pair, i, mask)
                return
        except MessageTooLarge as err:
            log.warning("relay: closing a connection of %s: %s", pair.link.peer, err)
            pair.link.cut()
        except OSError:  # reset by either side, or gone: the connection ends
            pass
        except Exception:  # a bug must not stop every other connection
            log.exception("relay: closing a connection of %s", pair.link.peer)
        self._close(pair)

    def _interest(self, pair: _Pair, i: int, mask: int) -> None:
        fd = pair.fds[i]
        if not pair.masks[i]:
            self._epoll.register(fd, mask)
            self._sides[fd] = (pair, i == 0)
        elif not mask:
            self._epoll.unregister(fd)
            del self._sides[fd]
        else:
            self._epoll.modify(fd, mask)
        pair.masks[i] = mask

    def _close(self, pair: _Pair) -> None:
        self._pairs.discard(pair)
        for i, fd in enumerate(pair.fds):
            if pair.masks[i]:
                self._sides.pop(fd, None)
                with contextlib.suppress(OSError, ValueError):
                    self._epoll.unregister(fd)
        try:
            pair.close()
        except Exception:  # pragma: no cover - on_close must not stop the loop
            log.exception("relay: closing a connection of %s", pair.link.peer)


__all__ = ["Link", "RelayLoop"]
