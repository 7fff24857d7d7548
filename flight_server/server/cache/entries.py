"""Catalog rows reused between calls: reading a table's registry row through SQLAlchemy on every
call cost about a tenth of a point query.

Rows are kept for ``ttl_seconds`` (about a second, like the callers' rights in
``security.access``): this process forgets them at once on its own catalog changes (register,
unregister, refresh), and other processes sharing the catalog database see a change within the
TTL. Unknown tables are not remembered, so a table registered elsewhere appears on the next call.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, TypeVar

from flight_server.server.registry import Registry, TableEntry

T = TypeVar("T")


class RegistryCache:
    """Reads of one :class:`Registry`, reused for ``ttl_seconds`` (0: every call reads it)."""

    def __init__(self, registry: Registry, ttl_seconds: float = 1.0):
        self.registry = registry
        self.ttl_seconds = ttl_seconds
        self._rows: dict[str, tuple[float, object]] = {}
        self._lock = threading.Lock()

    def _cached(self, key: str, load: Callable[[], T]) -> T:
        if self.ttl_seconds <= 0:
            return load()
        now = time.monotonic()
        with self._lock:
            hit = self._rows.get(key)
        if hit is not None and hit[0] > now:
            return hit[1]  # type: ignore[return-value]  # stored by this key's load
        value = load()
        with self._lock:
            if len(self._rows) > 10_000:  # bounded: many distinct names within a TTL
                self._rows.clear()
            self._rows[key] = (now + self.ttl_seconds, value)
        return value

    def load_table(self, identifier: str) -> TableEntry:
        """The table's row (raises ``UnknownTableError`` like :meth:`Registry.load_table`)."""
        return self._cached("table:" + identifier, lambda: self.registry.load_table(identifier))

    def list_tables(self, namespace: str | None = None) -> list[TableEntry]:
        rows = self._cached("tables:" + (namespace or "\0"), lambda: self.registry.list_tables(namespace))
        return list(rows)

    def list_namespaces(self) -> list[str]:
        return list(self._cached("\0namespaces", self.registry.list_namespaces))

    def forget(self) -> None:
        """Drop every cached row (after a catalog change)."""
        with self._lock:
            self._rows.clear()


__all__ = ["RegistryCache"]
