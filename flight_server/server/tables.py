"""Opened tables of the server: a :class:`TableState` per registered table, reused for a while."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Mapping

from catalog.state import TableState
from catalog.storage import open_table_storage
from flight_server.server.registry import TableEntry


class TableCache:
    """Table states by identifier, reused for ``ttl`` seconds (timelines go stale after that)."""

    def __init__(
        self,
        ttl: float,
        options: Callable[[str, Mapping[str, Any]], dict[str, Any]] | None = None,
        check: Callable[[str, str, Mapping[str, Any]], None] | None = None,
    ):
        self.ttl = ttl
        self._options = options or (lambda uri, stored: dict(stored))
        self._check = check  # (identifier, uri, stored options): raises for a row it refuses
        self._items: dict[str, tuple[float, str, TableState]] = {}
        self._lock = threading.Lock()

    def get(self, entry: TableEntry) -> TableState:
        if self._check is not None:
            self._check(entry.identifier, entry.base_uri, entry.storage_options)
        now = time.monotonic()
        with self._lock:
            hit = self._items.get(entry.identifier)
        if hit and hit[1] == entry.base_uri and now - hit[0] < self.ttl:
            return hit[2]
        storage = open_table_storage(entry.base_uri, self._options(entry.base_uri, entry.storage_options) or None)
        state = TableState.load(storage)
        with self._lock:
            self._items[entry.identifier] = (now, entry.base_uri, state)
        return state

    def drop(self, identifier: str | None = None) -> None:
        with self._lock:
            if identifier is None:
                self._items.clear()
            else:
                self._items.pop(identifier, None)


__all__ = ["TableCache"]
