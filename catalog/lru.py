"""One bounded, thread-safe LRU map, bounded in bytes, with hit/miss/eviction counters.

Every cache of the project (Parquet footers, table states, split results) is one of these, so
they share one eviction rule and one set of counters. Sizes are what the caller says an entry
costs (an estimate where exact sizes are not known); an entry larger than ``max_entry_bytes``
(default: the whole budget) is never stored. A listener, when given, hears every counted event
(``hit``, ``miss``, ``eviction``) and every change of the byte total, so a server can mirror the
counters into its metrics without this module knowing about them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Generic, Hashable, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

#: ``listener(cache name, event, amount)``; events: ``hit``, ``miss``, ``eviction`` (amount 1)
#: and ``bytes`` (amount: the new byte total)
CacheListener = Callable[[str, str, int], None]


@dataclass(frozen=True)
class CacheStats:
    """A snapshot of one cache's counters."""

    name: str
    hits: int
    misses: int
    evictions: int
    entries: int
    bytes: int
    max_bytes: int

    @property
    def hit_ratio(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


class BoundedLRU(Generic[K, V]):
    """Least recently used entries leave first once the byte total exceeds ``max_bytes``.

    Args:
        name: the cache's name in stats and metrics.
        max_bytes: the bound (0 disables the cache: nothing is stored).
        max_entry_bytes: larger entries are not stored (default: ``max_bytes``).
        listener: see :data:`CacheListener`.
        on_evict: called with the key and value of every entry evicted for room (not for
            :meth:`pop` or replacement), outside the lock: e.g. to delete a file it names.
    """

    def __init__(
        self,
        name: str,
        max_bytes: int,
        max_entry_bytes: int | None = None,
        listener: CacheListener | None = None,
        on_evict: Callable[[K, V], None] | None = None,
    ):
        if max_bytes < 0 or (max_entry_bytes is not None and max_entry_bytes < 0):
            raise ValueError(f"cache {name}: bounds must be >= 0")
        self.name = name
        self.max_bytes = max_bytes
        self.max_entry_bytes = max_bytes if max_entry_bytes is None else min(max_entry_bytes, max_bytes)
        self.listener = listener
        self.on_evict = on_evict
        self.bytes = 0
        self.hits = self.misses = self.evictions = 0
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def _tell(self, event: str, amount: int = 1) -> None:
        if self.listener is not None:
            self.listener(self.name, event, amount)

    def get(self, key: K) -> V | None:
        """The value of ``key`` (now the most recently used), or ``None``; counts a hit or a miss."""
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
                self.hits += 1
            else:
                self.misses += 1
        self._tell("hit" if hit is not None else "miss")
        return hit[0] if hit is not None else None

    def keys(self) -> list[K]:
        """The keys, least recently used first."""
        with self._lock:
            return list(self._entries)

    def peek(self, key: K) -> V | None:
        """The value of ``key`` without counting or reordering."""
        with self._lock:
            hit = self._entries.get(key)
        return hit[0] if hit is not None else None

    def put(self, key: K, value: V, nbytes: int) -> bool:
        """Store ``value`` as costing ``nbytes``; returns whether it was stored (not too large)."""
        if nbytes > self.max_entry_bytes:
            self.pop(key)
            return False
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.bytes -= old[1]
            self._entries[key] = (value, nbytes)
            self.bytes += nbytes
            evicted = self._evict()
            total = self.bytes
        self._evicted(evicted, total)
        return True

    def resize(self, key: K, nbytes: int) -> None:
        """Record that the entry of ``key`` now costs ``nbytes`` (it grew); evicts as needed."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return
            if nbytes > self.max_entry_bytes:
                del self._entries[key]
                self.bytes -= entry[1]
                self.evictions += 1
                evicted = [(key, entry[0])]
            else:
                self._entries[key] = (entry[0], nbytes)
                self.bytes += nbytes - entry[1]
                evicted = self._evict(keep=key)
            total = self.bytes
        self._evicted(evicted, total)

    def _evict(self, keep: K | None = None) -> list[tuple[K, V]]:
        """Drop least recently used entries until the bound holds (``keep`` last); lock held."""
        evicted = []
        while self.bytes > self.max_bytes and self._entries:
            key = next(iter(self._entries))
            if key == keep and len(self._entries) > 1:
                self._entries.move_to_end(key)
                key = next(iter(self._entries))
            value, cost = self._entries.pop(key)
            self.bytes -= cost
            evicted.append((key, value))
        self.evictions += len(evicted)
        return evicted

    def _evicted(self, evicted: list[tuple[K, V]], total: int) -> None:
        for key, value in evicted:
            if self.on_evict is not None:
                self.on_evict(key, value)
            self._tell("eviction")
        self._tell("bytes", total)

    def pop(self, key: K) -> V | None:
        with self._lock:
            entry = self._entries.pop(key, None)
            if entry is not None:
                self.bytes -= entry[1]
            total = self.bytes
        if entry is not None:
            self._tell("bytes", total)
        return entry[0] if entry is not None else None

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0
        self._tell("bytes", 0)

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(
                self.name, self.hits, self.misses, self.evictions, len(self._entries), self.bytes, self.max_bytes
            )


__all__ = ["BoundedLRU", "CacheListener", "CacheStats"]
