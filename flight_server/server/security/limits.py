"""Bounded work per call (interfaces.md section 6): every bound is configurable and named in
the error a client gets when it goes past it (INVALID_ARGUMENT; pyarrow's Flight server has no
way to send RESOURCE_EXHAUSTED from Python).

The bounds on a request are checked before the expensive steps: the body size before JSON
decoding, the nesting depth right after it, the number of filters and IN-list values before the
JSON Schema validation (which costs seconds for a 100k-filter command).
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterator, TypeVar

import pyarrow.flight as flight

from catalog.errors import InvalidQueryError
from flight_server.server.errors import ServerError

T = TypeVar("T")
MIDDLEWARE_KEY = "hudi-flight-caller"


class LimitExceededError(ServerError, InvalidQueryError):
    """A request went past a configured bound; the message names the bound."""

    def __init__(self, name: str, limit: float, what: str):
        super().__init__(f"limit {name} ({limit}) exceeded: {what}")
        self.name = name


@dataclass(frozen=True)
class Limits:
    """The bounds; the names are the configuration keys (``ServerConfig``)."""

    max_body_bytes: int = 1 << 20  # command, action body and (twice that) ticket
    max_json_depth: int = 32
    max_filters: int = 1_000
    max_in_values: int = 10_000
    max_properties_bytes: int = 64 << 10  # register-table properties, as JSON
    planning_seconds: float = 60.0
    max_streams_per_caller: int = 16
    footer_cache_bytes: int = 256 << 20

    def check_body(self, body: bytes, what: str) -> None:
        if len(body) > self.max_body_bytes:
            raise LimitExceededError("max_body_bytes", self.max_body_bytes, f"{what} has {len(body)} bytes")

    def check_ticket(self, ticket: bytes) -> None:
        if len(ticket) > 2 * self.max_body_bytes:
            raise LimitExceededError("max_body_bytes", 2 * self.max_body_bytes, f"ticket has {len(ticket)} bytes")

    def check_depth(self, doc: Any, what: str) -> None:
        """Refuse JSON nested deeper than ``max_json_depth`` (iteratively: no recursion)."""
        todo: list[tuple[Any, int]] = [(doc, 1)]
        while todo:
            node, depth = todo.pop()
            if isinstance(node, (dict, list)):
                if depth > self.max_json_depth:
                    raise LimitExceededError("max_json_depth", self.max_json_depth, f"{what} is nested deeper")
                children = node.values() if isinstance(node, dict) else node
                todo.extend((child, depth + 1) for child in children)

    def check_command(self, doc: Any) -> None:
        """Filter and IN-list counts of a decoded command."""
        filters = doc.get("filters") if isinstance(doc, dict) else None
        if not isinstance(filters, list):
            return
        if len(filters) > self.max_filters:
            raise LimitExceededError("max_filters", self.max_filters, f"command has {len(filters)} filters")
        values = sum(len(f[2]) for f in filters if isinstance(f, list) and len(f) > 2 and isinstance(f[2], list))
        if values > self.max_in_values:
            raise LimitExceededError("max_in_values", self.max_in_values, f"command has {values} IN-list values")

    def check_properties(self, properties: Any, size: int) -> None:
        if size > self.max_properties_bytes:
            raise LimitExceededError("max_properties_bytes", self.max_properties_bytes, f"properties have {size} bytes")

    def deadline(self) -> "Deadline":
        return Deadline("planning_seconds", self.planning_seconds)


class Deadline:
    """A cooperative time bound: long loops call :meth:`check`."""

    def __init__(self, name: str, seconds: float):
        self.name = name
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def check(self) -> None:
        if time.monotonic() > self.end:
            raise LimitExceededError(self.name, self.seconds, "the query took longer to plan")

    def bounded(self, items: Iterator[T]) -> Iterator[T]:
        for item in items:
            self.check()
            yield item


class CallerMiddleware(flight.ServerMiddleware):
    """Remembers a digest of the call's ``authorization`` header (never the header itself)."""

    def __init__(self, digest: str | None):
        self.digest = digest


class CallerMiddlewareFactory(flight.ServerMiddlewareFactory):
    def start_call(self, info: flight.CallInfo, headers: dict[str, list[Any]]) -> CallerMiddleware:
        values = headers.get("authorization") or headers.get("Authorization") or []
        raw = values[0] if values else None
        if isinstance(raw, str):
            raw = raw.encode()
        return CallerMiddleware(hashlib.sha256(raw).hexdigest()[:32] if raw else None)


def caller_of(context: flight.ServerCallContext) -> str:
    """Who is calling: the authenticated peer identity, else the credentials, else the peer host."""
    identity = context.peer_identity()
    if identity:
        return "id:" + (identity.decode(errors="replace") if isinstance(identity, bytes) else str(identity))
    middleware = context.get_middleware(MIDDLEWARE_KEY)
    if isinstance(middleware, CallerMiddleware) and middleware.digest:
        return "auth:" + middleware.digest
    peer = context.peer() or ""
    peer = peer.decode() if isinstance(peer, bytes) else peer
    return "peer:" + peer.rsplit(":", 1)[0]


class StreamGate:
    """Counts open ``do_get`` streams per caller and refuses past ``max_streams_per_caller``."""

    def __init__(self, limit: int):
        self.limit = limit
        self._open: dict[str, int] = {}
        self._lock = threading.Lock()

    def acquire(self, caller: str) -> None:
        with self._lock:
            current = self._open.get(caller, 0)
            if current >= self.limit:
                raise LimitExceededError("max_streams_per_caller", self.limit, "too many concurrent streams")
            self._open[caller] = current + 1

    def release(self, caller: str) -> None:
        with self._lock:
            left = self._open.get(caller, 1) - 1
            if left > 0:
                self._open[caller] = left
            else:
                self._open.pop(caller, None)

    def open_streams(self, caller: str) -> int:
        with self._lock:
            return self._open.get(caller, 0)

    def guarded(self, caller: str, items: Iterator[T]) -> Iterator[T]:
        """``items``, releasing the caller's slot when the stream ends, fails or is dropped."""
        return _Guarded(self, caller, items)


class _Guarded(Iterator[T]):
    """An iterator that gives its stream slot back exactly once (also when never started)."""

    def __init__(self, gate: StreamGate, caller: str, items: Iterator[T]):
        self._gate, self._caller, self._items = gate, caller, items
        self._held = True
        self._lock = threading.Lock()

    def _release(self) -> None:
        with self._lock:
            held, self._held = self._held, False
        if held:
            self._gate.release(self._caller)

    def __next__(self) -> T:
        try:
            return next(self._items)
        except BaseException:
            self._release()
            raise

    def __del__(self) -> None:
        self._release()


__all__ = [
    "CallerMiddlewareFactory",
    "Deadline",
    "LimitExceededError",
    "Limits",
    "MIDDLEWARE_KEY",
    "StreamGate",
    "caller_of",
]
