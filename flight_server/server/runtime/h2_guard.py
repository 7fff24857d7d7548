"""A front check of request sizes for the one-port relay: gRPC messages bounded before they reach
a serving process.

pyarrow gives Python no way to set gRPC's maximum receive message size: Arrow's C++ server
builder calls ``SetMaxReceiveMessageSize(-1)`` (unlimited) and its ``builder_hook`` option is not
exposed by ``pyarrow.flight.FlightServerBase``. gRPC therefore buffers a whole request message
(and pyarrow copies it) before any Python code can look at its size. The relay sees the bytes
first: on a cleartext (h2c) connection it follows the HTTP/2 frames from the client, reads the
5-byte gRPC message prefix of every DATA stream (compressed flag, 4-byte big-endian length)
and cuts the connection as soon as a message declares more than the bound, before its body is
forwarded. A TLS connection is fed to the guard once the relay decrypted it (``relay``: ``tls``); one
the relay passes through untouched turns the guard off (its bytes are opaque).

One message under the bound is not the whole risk: many of them at once, on many streams of one
connection or on many connections, are buffered together. So the guard also counts the bytes of
the messages it has seen begin and not yet end (what gRPC is buffering for them): per connection
(``max_connection_bytes``) and, through one :class:`BodyBudget` shared by every connection of
the relay, per peer host and for all of them together. A message that would go past either bound cuts its
connection at its prefix, like an oversized one.
"""

from __future__ import annotations

_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_FRAME_HEADER = 9
_DATA = 0x0
_PADDED = 0x8
_GRPC_PREFIX = 5


class MessageTooLarge(Exception):
    """A client's gRPC message declares more bytes than a bound allows (``what``: which bound)."""

    def __init__(self, declared: int, bound: int, what: str = "bound"):
        super().__init__(f"gRPC message of {declared} bytes ({what} {bound})")
        self.declared = declared


class BodyBudget:
    """The bytes of request messages begun and not yet ended on every guarded connection
    together, at most ``max_bytes``, and of one peer host's connections, at most
    ``max_peer_bytes`` (so one host holding messages open cannot fill it for everyone; ``0``:
    unbounded). Used by the relay's one loop thread only."""

    def __init__(self, max_bytes: int, max_peer_bytes: int = 0):
        self.max_bytes = max_bytes
        self.max_peer_bytes = max_peer_bytes
        self.used = 0
        self._peers: dict[str, int] = {}

    def take(self, declared: int, peer: str) -> None:
        """Count a message of ``declared`` bytes that begins on a connection of ``peer``.

        Raises:
            MessageTooLarge: the messages in progress would go past a bound.
        """
        held = self._peers.get(peer, 0)
        if self.max_peer_bytes and held + declared > self.max_peer_bytes:
            raise MessageTooLarge(declared, self.max_peer_bytes, f"with {held} bytes in progress, peer body")
        if self.max_bytes and self.used + declared > self.max_bytes:
            raise MessageTooLarge(declared, self.max_bytes, f"with {self.used} bytes in progress, body memory")
        self.used += declared
        self._peers[peer] = held + declared

    def give(self, received: int, peer: str) -> None:
        """``received`` bytes of ``peer``'s messages in progress arrived (or their connection ended)."""
        self.used -= received
        left = self._peers.get(peer, 0) - received
        if left > 0:
            self._peers[peer] = left
        else:
            self._peers.pop(peer, None)


class H2Guard:
    """Follows the client side of one HTTP/2 connection; :meth:`feed` raises on a message over
    ``max_message_bytes``. Anything that is not cleartext HTTP/2 turns the guard off.

    Only frame headers and gRPC message prefixes are decoded; payloads are skipped by counting,
    in place (no copy of what was fed), so a small RPC costs a few integer steps per read. Bytes
    are kept only while a frame header or a message prefix is split between two reads.
    """

    def __init__(self, max_message_bytes: int, max_connection_bytes: int = 0, budget: BodyBudget | None = None,
                 peer: str = ""):
        self.bound = max_message_bytes
        self.connection_bound = max_connection_bytes  # messages in progress on this connection (0: unbounded)
        self.budget = budget
        self.peer = peer  # the client's host, for the budget's share per peer
        self.in_progress = 0  # bytes of this connection's messages begun and not yet received
        self.active = True
        self._preface_at = 0  # bytes of the client preface matched so far
        self._header = bytearray()  # a frame header split between reads
        self._skip = 0  # payload bytes of a non-DATA frame still to come
        self._frame_left = 0  # bytes of the current DATA frame still to come (padding included)
        self._frame_stream = 0
        self._pad = 0  # padding at the end of the current DATA frame
        self._pad_length_due = False  # a padded DATA frame whose pad length byte is next
        self._streams: dict[int, tuple[int, bytes]] = {}  # stream -> (message bytes left, prefix so far)

    def feed(self, data: bytes | memoryview) -> None:
        """Account for ``data`` (the next bytes from the client).

        Raises:
            MessageTooLarge: a message declared more than the bound.
        """
        if not self.active:
            return
        at, end = 0, len(data)
        if self._preface_at < len(_PREFACE):
            at = min(len(_PREFACE) - self._preface_at, end)
            if data[:at] != _PREFACE[self._preface_at:self._preface_at + at]:
                self.active = False  # TLS or not HTTP/2: pass through
                return
            self._preface_at += at
        while at < end:
            if self._skip:
                step = min(self._skip, end - at)
                self._skip -= step
                at += step
            elif self._pad_length_due:
                self._pad = data[at]
                self._pad_length_due = False
                self._frame_left -= 1
                at += 1
            elif self._frame_left:
                at = self._data_bytes(data, at, end)
            elif self._header or end - at < _FRAME_HEADER:
                step = min(_FRAME_HEADER - len(self._header), end - at)
                self._header += data[at:at + step]
                at += step
                if len(self._header) == _FRAME_HEADER:
                    self._frame(self._header, 0)
                    self._header.clear()
            else:
                self._frame(data, at)
                at += _FRAME_HEADER

    def _frame(self, header: bytes | bytearray | memoryview, at: int) -> None:
        """Start the frame whose 9-byte header begins at ``header[at]``."""
        length = int.from_bytes(header[at:at + 3], "big")
        if header[at + 3] != _DATA:
            self._skip = length
            return
        self._frame_stream = int.from_bytes(header[at + 5:at + 9], "big") & 0x7FFFFFFF
        self._frame_left, self._pad = length, 0
        self._pad_length_due = bool(header[at + 4] & _PADDED and length)

    def _data_bytes(self, data: bytes | memoryview, at: int, end: int) -> int:
        """Consume payload of the current DATA frame from ``data[at:end]`` (gRPC message prefixes
        and bodies, then padding); where the next unconsumed byte is."""
        payload = self._frame_left - self._pad
        if payload <= 0:  # only padding left
            step = min(self._frame_left, end - at)
            self._frame_left -= step
            return at + step
        stop = at + min(payload, end - at)
        self._frame_left -= stop - at
        left, prefix = self._streams.pop(self._frame_stream, (0, b""))
        while at < stop:
            if left:
                step = min(left, stop - at)
                left -= step
                at += step
                self._received(step)
                continue
            if not prefix and stop - at >= _GRPC_PREFIX:  # a whole prefix in this read
                declared = int.from_bytes(data[at + 1:at + _GRPC_PREFIX], "big")
                at += _GRPC_PREFIX
            else:
                step = min(_GRPC_PREFIX - len(prefix), stop - at)
                prefix += bytes(data[at:at + step])
                at += step
                if len(prefix) < _GRPC_PREFIX:
                    break
                declared, prefix = int.from_bytes(prefix[1:], "big"), b""
            self._begin(declared)
            left = declared
        if left or prefix:  # inside a message: remember where
            self._streams[self._frame_stream] = (left, prefix)
        return stop

    def _begin(self, declared: int) -> None:
        """A message of ``declared`` bytes begins: within every bound, or refused."""
        if declared > self.bound:
            raise MessageTooLarge(declared, self.bound)
        if self.connection_bound and self.in_progress + declared > self.connection_bound:
            raise MessageTooLarge(declared, self.connection_bound,
                                  f"with {self.in_progress} bytes in progress, connection body")
        if self.budget is not None:
            self.budget.take(declared, self.peer)
        self.in_progress += declared

    def _received(self, step: int) -> None:
        self.in_progress -= step
        if self.budget is not None:
            self.budget.give(step, self.peer)

    def release(self) -> None:
        """The connection ended: its messages in progress no longer count against the budget."""
        self._received(self.in_progress)
        self._streams.clear()


__all__ = ["BodyBudget", "H2Guard", "MessageTooLarge"]
