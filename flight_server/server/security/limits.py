"""Bounded work per call (docs/flight.md, "Authorization"): every bound is configurable and named in
the error a client gets when it goes past it: INVALID_ARGUMENT for a request too large or too
complex (sending it again cannot help), a retryable refusal for load (``security.budgets``).

The bounds on a request are checked before the expensive steps: the body size before JSON
decoding, the nesting depth right after it, the number of filters and IN-list values before the
JSON Schema validation (which costs seconds for a 100k-filter command).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Iterator, TypeVar

from catalog.errors import InvalidQueryError
from flight_server.server.errors import ServerError

T = TypeVar("T")


class LimitExceededError(ServerError, InvalidQueryError):
    """A request went past a configured bound; the message names the bound."""

    def __init__(self, name: str, limit: float | str, what: str):
        super().__init__(f"limit {name} ({limit}) exceeded: {what}")
        self.name = name


@dataclass(frozen=True)
class Limits:
    """The bounds; the names are the configuration keys (``ServerConfig``)."""

    max_body_bytes: int = 1 << 20  # command, action body and (twice that) ticket
    max_json_depth: int = 32
    max_filters: int = 1_000
    max_in_values: int = 10_000  # JSON commands and SQL alike
    max_sql_tokens: int = 50_000  # words and symbols of one SQL statement, before parsing
    max_sql_depth: int = 256  # nesting of its parsed expressions
    max_sql_generated_values: int = 1_000_000  # elements or characters one SQL function call may build
    max_properties_bytes: int = 64 << 10  # register-table properties, as JSON
    planning_seconds: float = 60.0
    # concurrent work (security.budgets; 0: unbounded). A connection is one client's gRPC
    # connection (peer host and port); a user, an authenticated name.
    max_streams_per_connection: int = 16
    max_streams_per_user: int = 64
    max_streams_total: int = 256
    stream_queue_seconds: float = 30.0  # a stream past its user's or connection's bound waits this long for a slot
    max_plans_per_connection: int = 8
    max_plans_per_user: int = 16
    max_plans_total: int = 32
    stream_memory_bytes: int = 1 << 30  # record batches held by the streams of a process
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


@dataclass(frozen=True)
class RelayLimits:
    """The bounds of the one-port relay of ``serve --processes N`` (``runtime.relay``); configuration
    keys ``max_connections``, ``max_connections_per_peer``, ``relay_handshake_seconds``,
    ``relay_idle_seconds``, ``relay_half_open_seconds``, ``max_body_bytes_per_connection``,
    ``max_body_bytes_per_peer``, ``body_memory_bytes``."""

    max_connections: int = 1024
    max_connections_per_peer: int = 256
    handshake_seconds: float = 10.0
    idle_seconds: float = 600.0
    half_open_seconds: float = 30.0
    displace_after_seconds: float = 1.0  # idle this long, a connection may give its place to a new one
    max_message_bytes: int = 0  # a cleartext client's gRPC message past this cuts its connection (0: off)
    # request messages in progress (begun, not yet received whole): on one connection, and on all
    # together; a message past either cuts its connection (0: unbounded; runtime.h2_guard)
    max_body_bytes_per_connection: int = 0
    max_body_bytes_per_peer: int = 0  # ... on the connections of one peer host
    body_memory_bytes: int = 0


class Deadline:
    """A cooperative time bound: long loops call :meth:`check` (``what``: what took too long)."""

    def __init__(self, name: str, seconds: float, what: str = "the query took longer to plan"):
        self.name = name
        self.seconds = seconds
        self.what = what
        self.end = time.monotonic() + seconds

    def check(self) -> None:
        if time.monotonic() > self.end:
            raise LimitExceededError(self.name, self.seconds, self.what)

    def bounded(self, items: Iterator[T]) -> Iterator[T]:
        for item in items:
            self.check()
            yield item


__all__ = ["Deadline", "LimitExceededError", "Limits", "RelayLimits"]
