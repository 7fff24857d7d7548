"""A front check of request sizes for the one-port relay: gRPC messages bounded before they reach
a serving process.

pyarrow gives Python no way to set gRPC's maximum receive message size: Arrow's C++ server
builder calls ``SetMaxReceiveMessageSize(-1)`` (unlimited) and its ``builder_hook`` option is not
exposed by ``pyarrow.flight.FlightServerBase``. gRPC therefore buffers a whole request message
(and pyarrow copies it) before any Python code can look at its size. The relay sees the bytes
first: on a cleartext (h2c) connection it follows the HTTP/2 frames from the client, reads the
5-byte gRPC message prefix of every DATA stream (compressed flag, 4-byte big-endian length)
and cuts the connection as soon as a message declares more than the bound, before its body is
forwarded. A TLS connection passes through untouched (its bytes are opaque to the relay).
"""

from __future__ import annotations

_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_FRAME_HEADER = 9
_DATA = 0x0
_PADDED = 0x8
_GRPC_PREFIX = 5


class MessageTooLarge(Exception):
    """A client's gRPC message declares more bytes than the bound."""

    def __init__(self, declared: int, bound: int):
        super().__init__(f"gRPC message of {declared} bytes (bound {bound})")
        self.declared = declared


class H2Guard:
    """Follows the client side of one HTTP/2 connection; :meth:`feed` raises on a message over
    ``max_message_bytes``. Anything that is not cleartext HTTP/2 turns the guard off."""

    def __init__(self, max_message_bytes: int):
        self.bound = max_message_bytes
        self.active = True
        self._buf = b""
        self._preface_seen = False
        self._frame_left = 0  # payload bytes of the current DATA frame still to come
        self._frame_stream = 0
        self._pad = 0  # padding at the end of the current DATA frame
        self._skip = 0  # payload bytes of a non-DATA frame still to come
        self._streams: dict[int, tuple[int, bytes]] = {}  # stream -> (message bytes left, prefix so far)

    def feed(self, data: bytes) -> None:
        """Account for ``data`` (the next bytes from the client).

        Raises:
            MessageTooLarge: a message declared more than the bound.
        """
        if not self.active:
            return
        self._buf += data
        if not self._preface_seen:
            if len(self._buf) < len(_PREFACE):
                if not _PREFACE.startswith(self._buf):
                    self.active = False  # TLS or not HTTP/2: pass through
                return
            if not self._buf.startswith(_PREFACE):
                self.active = False
                return
            self._buf = self._buf[len(_PREFACE):]
            self._preface_seen = True
        self._parse()

    def _parse(self) -> None:
        while self._buf:
            if self._skip:
                n = min(self._skip, len(self._buf))
                self._skip -= n
                self._buf = self._buf[n:]
                continue
            if self._frame_left:
                self._data_bytes()
                continue
            if len(self._buf) < _FRAME_HEADER:
                return
            header, self._buf = self._buf[:_FRAME_HEADER], self._buf[_FRAME_HEADER:]
            length = int.from_bytes(header[:3], "big")
            kind, flags = header[3], header[4]
            stream = int.from_bytes(header[5:9], "big") & 0x7FFFFFFF
            if kind != _DATA:
                self._skip = length
                continue
            self._frame_stream, self._frame_left, self._pad = stream, length, 0
            if flags & _PADDED and length:
                if not self._buf:  # the pad length byte has not arrived yet
                    self._buf = header + self._buf
                    self._frame_left = 0
                    return
                self._pad = self._buf[0]
                self._buf = self._buf[1:]
                self._frame_left -= 1

    def _data_bytes(self) -> None:
        """Consume payload of the current DATA frame: gRPC message prefixes and bodies."""
        payload = self._frame_left - self._pad
        if payload <= 0:  # only padding left
            n = min(self._frame_left, len(self._buf))
            self._frame_left -= n
            self._buf = self._buf[n:]
            return
        n = min(payload, len(self._buf))
        chunk, self._buf = self._buf[:n], self._buf[n:]
        self._frame_left -= n
        left, prefix = self._streams.get(self._frame_stream, (0, b""))
        while chunk:
            if left:
                step = min(left, len(chunk))
                left -= step
                chunk = chunk[step:]
                continue
            need = _GRPC_PREFIX - len(prefix)
            prefix, chunk = prefix + chunk[:need], chunk[need:]
            if len(prefix) == _GRPC_PREFIX:
                declared = int.from_bytes(prefix[1:5], "big")
                if declared > self.bound:
                    raise MessageTooLarge(declared, self.bound)
                left, prefix = declared, b""
        if left or prefix:
            self._streams[self._frame_stream] = (left, prefix)
        else:  # at a message boundary: nothing to remember
            self._streams.pop(self._frame_stream, None)


__all__ = ["H2Guard", "MessageTooLarge"]
