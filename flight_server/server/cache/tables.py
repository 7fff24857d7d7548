"""Opened tables of the server: the planned state of each table, versioned by its timeline.

A table's :class:`TableState` (config, timeline, metadata-table listing with its statistics and
record-index lookups, file slices) is kept while the table does not move: every plan first asks
:meth:`TableState.refreshed`, which costs ONE storage request (a listing of the active timeline)
and returns the same state when no instant file came or went. When the table moved, the next
state is built from the cached one, reading only what changed, so a commit is visible to the
very next plan. ``do_get`` skips even that check when the cached state already holds the
instant its ticket is pinned to. An operator may bound staleness instead (``max_staleness_ms``):
a state checked less than that long ago is reused without any storage request, and a
background thread (:class:`~flight_server.server.cache.refresh.BackgroundRefresh`) re-checks
recently queried tables about once per that bound, so their queries do not wait on a listing.

States live in one :class:`~catalog.lru.BoundedLRU` bounded in (estimated) bytes; an entry's
size is re-measured after each plan, as planning fills the state's memos.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping

from catalog.lru import BoundedLRU, CacheListener, CacheStats
from catalog.state import TableState
from catalog.storage import open_table_storage
from catalog.table.bootstrap import bootstrap_base_path
from flight_server.server.cache.disk_cache import DiskCache
from flight_server.server.cache.refresh import BackgroundRefresh
from flight_server.server.registry import TableEntry
from flight_server.server.security.policy import StoragePolicyError

DEFAULT_TABLE_CACHE_BYTES = 256 << 20
MEASURE_SECONDS = 0.5

_Key = tuple[str, str]  # (identifier, base URI): a re-registered table is another entry


class TableCache:
    """Table states by identifier, bounded in bytes.

    Args:
        max_bytes: the bound of all cached states together (0: nothing is kept).
        options: ``(uri, stored options) -> storage options`` (the server's storage policy).
        listener: told of hits, misses, evictions and byte totals (metrics).
        disk_cache: put in front of every remote table's immutable file reads.
        check: ``(identifier, uri, stored options)``, raising :class:`StoragePolicyError` for a
            catalog row the storage policy refuses (checked on every open, rows older than the
            policy included), and for a bootstrapped table's source dataset outside it.
        max_staleness_seconds: reuse a state checked this recently without listing the timeline
            (0: every open checks).
        forget_checks: called by :meth:`drop` (after a catalog change): ``check`` forgets what it
            kept (the storage policy's path resolutions).
        clock: monotonic seconds (a test's own clock).
    """

    def __init__(
        self,
        max_bytes: int = DEFAULT_TABLE_CACHE_BYTES,
        options: Callable[[str, Mapping[str, Any]], dict[str, Any]] | None = None,
        listener: CacheListener | None = None,
        disk_cache: DiskCache | None = None,
        check: Callable[[str, str, Mapping[str, Any]], None] | None = None,
        max_staleness_seconds: float = 0.0,
        forget_checks: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._options = options or (lambda uri, stored: dict(stored))
        self._check = check  # (identifier, uri, stored options): raises for a row it refuses
        self._forget_checks = forget_checks
        self.disk_cache = disk_cache
        self._states: BoundedLRU[_Key, TableState] = BoundedLRU("table_states", max_bytes, listener=listener)
        self.max_staleness_seconds = max_staleness_seconds
        self._checked: dict[_Key, float] = {}  # monotonic time of each state's last timeline check
        self._measured: dict[_Key, float] = {}  # ... and of its last measure
        self._entries: dict[_Key, TableEntry] = {}  # the catalog row of each checked state
        self._clock = clock
        self.refresh: BackgroundRefresh[_Key] | None = None
        if max_staleness_seconds > 0:
            self.refresh = BackgroundRefresh(
                max_staleness_seconds, self._refresh_one, lambda key: self._checked.get(key, float("-inf")), clock
            )

    def get(self, entry: TableEntry, instant: str | None = None, fresh: bool = True) -> TableState:
        """The state of ``entry`` now (one timeline listing when cached, a full load when not).

        ``instant``: the caller is pinned to this completed instant (a ticket); a cached state
        that already holds it is returned without any storage request. ``fresh=False``: any
        cached state will do (a prepared statement's schema; its execution checks again).
        """
        if self._check is not None:
            self._check(entry.identifier, entry.base_uri, entry.storage_options)
        key = (entry.identifier, entry.base_uri)
        cached = self._states.get(key)
        if cached is not None and (not fresh or (instant is not None and cached.timeline.is_completed(instant))):
            return cached
        now = self._clock()
        if self.refresh is not None:
            self.refresh.queried(key)
        if cached is not None and self.max_staleness_seconds > 0:
            if now - self._checked.get(key, float("-inf")) < self.max_staleness_seconds:
                return cached
        if cached is None:
            storage = open_table_storage(entry.base_uri, self._options(entry.base_uri, entry.storage_options) or None)
            if self.disk_cache is not None:
                storage.fs = self.disk_cache.wrap(storage.fs)
            state = TableState.load(storage)
        else:
            state = cached.refreshed()
        self._keep(key, entry, cached, state, now)
        return state

    def _keep(self, key: _Key, entry: TableEntry, cached: TableState | None, state: TableState, now: float) -> None:
        """Cache ``state`` (checked at ``now``) in place of ``cached``."""
        if state is not cached:
            self._check_bootstrap_source(entry, state)
            self._states.put(key, state, state.estimated_bytes())
            self._measured.pop(key, None)  # a new state: measure it after its first plan
        if self.max_staleness_seconds > 0:
            if len(self._checked) > 4 * max(len(self._states), 256):  # forget evicted tables
                self._checked = {k: v for k, v in self._checked.items() if k in self._states}
                self._entries = {k: v for k, v in self._entries.items() if k in self._states}
            self._checked[key] = now
            self._entries[key] = entry

    def _refresh_one(self, key: _Key, now: float) -> None:
        """The background refresh of one table: one timeline listing, the state replaced when
        the table moved (a table evicted or dropped meanwhile leaves the round)."""
        cached, entry = self._states.peek(key), self._entries.get(key)
        if cached is None or entry is None:
            if self.refresh is not None:
                self.refresh.forget(key)
            return
        self._keep(key, entry, cached, cached.refreshed(), now)

    def close(self) -> None:
        """Stop the background refresh (server shutdown)."""
        if self.refresh is not None:
            self.refresh.close()

    def _check_bootstrap_source(self, entry: TableEntry, state: TableState) -> None:
        """A bootstrapped table reads its source dataset (``hoodie.bootstrap.base.path``, written
        by whoever writes the table): it must lie where the table itself may."""
        source = bootstrap_base_path(state.config)
        if source is None or self._check is None:
            return
        try:
            self._check(entry.identifier, source, entry.storage_options)
        except StoragePolicyError:
            raise StoragePolicyError(
                f"table {entry.identifier}: its bootstrap source dataset (hoodie.bootstrap.base.path) lies outside "
                "the roots this server allows"
            ) from None

    def measure(self, entry: TableEntry, state: TableState) -> None:
        """Re-measure ``state`` (planning grew its memos) if it is still the cached one; at most
        every ``MEASURE_SECONDS`` per table (walking the memos costs more than a point query's
        planning adds to them)."""
        key = (entry.identifier, entry.base_uri)
        now = time.monotonic()
        if now - self._measured.get(key, float("-inf")) < MEASURE_SECONDS:
            return
        if self._states.peek(key) is state:
            self._measured[key] = now
            self._states.resize(key, state.estimated_bytes())

    def drop(self, identifier: str | None = None) -> None:
        """Forget the state of ``identifier`` (``None``: every table), and what ``check`` kept."""
        if self._forget_checks is not None:
            self._forget_checks()
        if identifier is None:
            self._states.clear()
            return
        for key in [k for k in self._states.keys() if k[0] == identifier]:
            self._states.pop(key)

    def stats(self) -> CacheStats:
        return self._states.stats()


__all__ = ["DEFAULT_TABLE_CACHE_BYTES", "TableCache"]
