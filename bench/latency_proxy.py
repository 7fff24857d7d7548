"""A latency-injecting HTTP/1.1 forwarder on 127.0.0.1 in front of an object store (moto S3).

Every request a client sends (several per kept-alive connection) is read whole (head, then its
body by ``Content-Length`` or chunks), held for :attr:`LatencyProxy.delay_ms` milliseconds,
forwarded to the upstream server on the connection's own upstream connection, and the response
relayed back (body by ``Content-Length``, chunks, or up to the upstream closing). On the way it
counts requests and response body bytes by kind, so a benchmark counts what reached the store,
independently of the counters of the code it measures. A response is counted before its last
byte is sent on, so a client that reads the counts after its call returned sees that call:

* ``LIST``: a ``GET`` of a bucket (no object key: list objects, bucket location);
* ``GET range``: a ``GET`` of an object with a ``Range`` header; ``GET``: without one;
* ``HEAD``, ``PUT``, ``POST``, ``DELETE`` (and any other method by its name).

``Expect: 100-continue`` is answered by the proxy itself (the body is read before the request is
forwarded, so the held request is the whole request). Nothing here is clever about HTTP beyond
that: it is a benchmark tool for loopback clients of a loopback store.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from typing import BinaryIO, Callable
from urllib.parse import urlsplit

MAX_HEAD_BYTES = 64 << 10
CHUNK = 256 << 10


@dataclass(frozen=True)
class Traffic:
    """Requests and response body bytes by kind (a snapshot, or the difference of two)."""

    requests: dict[str, int]
    bytes: dict[str, int]

    @property
    def total_requests(self) -> int:
        return sum(self.requests.values())

    @property
    def total_bytes(self) -> int:
        return sum(self.bytes.values())

    def __sub__(self, earlier: Traffic) -> Traffic:
        kinds = set(self.requests) | set(earlier.requests)
        return Traffic({k: self.requests.get(k, 0) - earlier.requests.get(k, 0) for k in kinds},
                       {k: self.bytes.get(k, 0) - earlier.bytes.get(k, 0) for k in kinds})


class _Closed(Exception):
    """The peer closed the connection (or went idle past the timeout)."""


def _read_head(stream: BinaryIO) -> list[bytes] | None:
    """The lines of one message head (without the blank line); None at a clean end of stream."""
    lines: list[bytes] = []
    size = 0
    while True:
        line = stream.readline(MAX_HEAD_BYTES)
        if not line:
            if lines:
                raise _Closed("connection closed inside a message head")
            return None
        size += len(line)
        if size > MAX_HEAD_BYTES:
            raise _Closed("message head too large")
        if line in (b"\r\n", b"\n"):
            if not lines:  # stray blank line between messages
                continue
            return lines
        lines.append(line)


def _headers(lines: list[bytes]) -> dict[str, str]:
    out = {}
    for line in lines[1:]:
        name, _, value = line.decode("latin-1").partition(":")
        out[name.strip().lower()] = value.strip()
    return out


def _copy_exact(src: BinaryIO, dst: socket.socket, n: int, add: Callable[[int], None]) -> None:
    """Relay exactly ``n`` bytes, each counted (``add``) before it is sent on."""
    left = n
    while left:
        data = src.read(min(CHUNK, left))
        if not data:
            raise _Closed("connection closed inside a message body")
        add(len(data))
        dst.sendall(data)
        left -= len(data)


def _copy_chunked(src: BinaryIO, dst: socket.socket, add: Callable[[int], None]) -> None:
    """Relay a chunked body as it is (sizes, chunks, trailers), the payload counted (``add``)."""
    while True:
        size_line = src.readline(MAX_HEAD_BYTES)
        if not size_line:
            raise _Closed("connection closed inside a chunked body")
        dst.sendall(size_line)
        size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            while True:  # trailers, up to the blank line
                trailer = src.readline(MAX_HEAD_BYTES)
                if not trailer:
                    raise _Closed("connection closed inside chunk trailers")
                dst.sendall(trailer)
                if trailer in (b"\r\n", b"\n"):
                    return
        _copy_exact(src, dst, size, add)
        dst.sendall(src.readline(MAX_HEAD_BYTES))  # the CRLF after the chunk


def request_kind(method: str, target: str, headers: dict[str, str]) -> str:
    """``LIST`` / ``GET range`` / ``GET`` / the method, for a path-style S3 request."""
    if method != "GET":
        return method
    path = urlsplit(target).path
    if len([part for part in path.split("/") if part]) <= 1:
        return "LIST"
    return "GET range" if "range" in headers else "GET"


class LatencyProxy:
    """Forward HTTP/1.1 requests from ``127.0.0.1:<port>`` to ``upstream`` (``http://host:port``),
    each held ``delay_ms`` first (settable while running), counting them (:meth:`traffic`)."""

    def __init__(self, upstream: str, delay_ms: float = 0.0, idle_seconds: float = 120.0):
        parts = urlsplit(upstream)
        if parts.scheme != "http" or not parts.hostname or not parts.port:
            raise ValueError(f"upstream must be http://host:port, not {upstream!r}")
        self.upstream = (parts.hostname, parts.port)
        self.delay_ms = delay_ms
        self.idle_seconds = idle_seconds
        self._lock = threading.Lock()
        self._requests: dict[str, int] = {}
        self._bytes: dict[str, int] = {}
        self._sockets: set[socket.socket] = set()
        self._closed = False
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._acceptor = threading.Thread(target=self._accept, name="latency-proxy-accept", daemon=True)
        self._acceptor.start()

    # -- counting ------------------------------------------------------------------------------
    def traffic(self) -> Traffic:
        with self._lock:
            return Traffic(dict(self._requests), dict(self._bytes))

    def _count(self, kind: str, nbytes: int, request: bool = False) -> None:
        with self._lock:
            self._requests[kind] = self._requests.get(kind, 0) + request
            self._bytes[kind] = self._bytes.get(kind, 0) + nbytes

    # -- serving -------------------------------------------------------------------------------
    def _track(self, sock: socket.socket) -> bool:
        with self._lock:
            if self._closed:
                return False
            self._sockets.add(sock)
            return True

    def _untrack(self, sock: socket.socket | None) -> None:
        if sock is None:
            return
        with self._lock:
            self._sockets.discard(sock)
        try:
            sock.close()
        except OSError:
            pass

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:  # closed
                return
            if not self._track(conn):
                conn.close()
                return
            threading.Thread(target=self._serve, args=(conn,), name="latency-proxy-conn", daemon=True).start()

    def _connect(self) -> tuple[socket.socket, BinaryIO]:
        up = socket.create_connection(self.upstream, timeout=self.idle_seconds)
        up.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if not self._track(up):
            up.close()
            raise _Closed("proxy closed")
        return up, up.makefile("rb")

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(self.idle_seconds)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        client = conn.makefile("rb")
        up: socket.socket | None = None
        upstream: BinaryIO | None = None
        try:
            while True:
                head = _read_head(client)
                if head is None:
                    return
                method, target = head[0].decode("latin-1").split(" ", 2)[:2]
                headers = _headers(head)
                if headers.get("expect", "").lower() == "100-continue":
                    conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                    head = [line for line in head if not line.lower().startswith(b"expect:")]
                if "chunked" in headers.get("transfer-encoding", "").lower():
                    body = _read_chunked(client)
                else:
                    body = client.read(int(headers.get("content-length", "0") or 0))
                if self.delay_ms > 0:
                    time.sleep(self.delay_ms / 1000)
                if up is None:
                    up, upstream = self._connect()
                assert upstream is not None
                up.sendall(b"".join(head) + b"\r\n" + body)
                keep = self._relay_response(upstream, conn, method, request_kind(method, target, headers))
                if keep is None:  # the body ran to the upstream's end: the client's must end too
                    return
                if not keep:
                    self._untrack(up)
                    up, upstream = None, None
        except (OSError, ValueError, _Closed):
            return
        finally:
            self._untrack(up)
            self._untrack(conn)

    def _relay_response(self, upstream: BinaryIO, conn: socket.socket, method: str, kind: str) -> bool | None:
        """Relay one response (after any 1xx ones), counted before the client has it all; whether
        the upstream connection is reusable (None: its body was delimited by the upstream closing)."""
        while True:
            head = _read_head(upstream)
            if head is None:
                raise _Closed("upstream closed before answering")
            status = int(head[0].split()[1])
            if not 100 <= status < 200:
                break
            conn.sendall(b"".join(head) + b"\r\n")
        self._count(kind, 0, request=True)
        conn.sendall(b"".join(head) + b"\r\n")
        headers = _headers(head)
        keep = headers.get("connection", "").lower() != "close" and not head[0].startswith(b"HTTP/1.0")

        def add(n: int) -> None:
            self._count(kind, n)

        if method == "HEAD" or status in (204, 304):
            return keep
        if "chunked" in headers.get("transfer-encoding", "").lower():
            _copy_chunked(upstream, conn, add)
            return keep
        if "content-length" in headers:
            _copy_exact(upstream, conn, int(headers["content-length"]), add)
            return keep
        while True:
            data = upstream.read1(CHUNK)  # type: ignore[attr-defined]
            if not data:
                return None
            add(len(data))
            conn.sendall(data)

    def close(self) -> None:
        """Stop accepting, close every connection; handler threads end on their closed sockets."""
        with self._lock:
            self._closed = True
            sockets = list(self._sockets)
            self._sockets.clear()
        self._listener.close()
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        self._acceptor.join(5)

    def __enter__(self) -> LatencyProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _read_chunked(src: BinaryIO) -> bytes:
    """A chunked request body, re-framed as it came (the upstream gets the same bytes)."""
    parts = []
    while True:
        size_line = src.readline(MAX_HEAD_BYTES)
        if not size_line:
            raise _Closed("connection closed inside a chunked body")
        parts.append(size_line)
        size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            while True:
                trailer = src.readline(MAX_HEAD_BYTES)
                if not trailer:
                    raise _Closed("connection closed inside chunk trailers")
                parts.append(trailer)
                if trailer in (b"\r\n", b"\n"):
                    return b"".join(parts)
        data = src.read(size)
        if len(data) != size:
            raise _Closed("connection closed inside a chunk")
        parts.append(data)
        parts.append(src.readline(MAX_HEAD_BYTES))
