"""What a statement needs of a table that one table state decides, kept for that very state.

Two things cost a warm statement a plan or a listing although the table has not changed since
the last statement: a scan's schema and pinned scan (the schema a table reference resolves to is
checked again before a kept analysis is reused, ``sql.analyses``; a result schema and a statement
ticket need those of every scan) and a metadata count (``SELECT count(*)`` answered from
footer row counts or column statistics), which lists every split of the scan only to add up
their rows. Both are functions of the table state and the read options: the state's timeline
decides the instant options resolve to, its schema and its file listing. So both are kept per
table state *object*, which the table cache replaces as soon as one timeline listing shows an
instant file added or removed: the next statement after a commit plans and counts again. A state
no longer cached is not kept alive by them (a weak reference), and both are bounded in bytes
(``sql_table_facts_cache_bytes`` each).
"""

from __future__ import annotations

import json
import weakref
from dataclasses import dataclass
from typing import Callable, Generic, TypeVar

import pyarrow as pa

from catalog.lru import BoundedLRU, CacheListener
from catalog.meta import META_TABLES
from catalog.plan.options import ReadOptions
from catalog.state import TableState
from flight_server.server.config_sections import SqlSection
from flight_server.server.flightsql.names import meta_reference
from flight_server.server.query.queries import Call, OpenTable, PlannedScan
from flight_server.server.query.tickets import PinnedScan

#: what an entry costs besides its key's text and its value (the weak reference, tuples, dict slot)
ENTRY_OVERHEAD = 256
V = TypeVar("V")


class PerState(Generic[V]):
    """Values by table and read options, each valid for the table state it was made from.

    Args:
        name: the cache's name (metrics).
        max_bytes: the bound, each entry costing its key's text, ``size(value)`` and
            :data:`ENTRY_OVERHEAD`.
        size: what a value costs in bytes.
    """

    def __init__(
        self, name: str, max_bytes: int, size: Callable[[V], int], listener: CacheListener | None = None
    ):
        self._kept: BoundedLRU[tuple[str, str, str], tuple[weakref.ref[TableState], V]] = BoundedLRU(
            name, max_bytes, listener=listener
        )
        self._size = size

    def get(self, table: OpenTable, options: ReadOptions, make: Callable[[], V]) -> V:
        """The value for ``options`` on ``table``: kept for its state, else ``make()`` (kept
        when it returns; an error is not kept)."""
        key = (table.entry.identifier, table.entry.base_uri, json.dumps(options.to_json(), sort_keys=True))
        kept = self._kept.get(key)
        if kept is not None and kept[0]() is table.state:
            return kept[1]
        value = make()
        nbytes = sum(len(part) for part in key) + self._size(value) + ENTRY_OVERHEAD
        self._kept.put(key, (weakref.ref(table.state), value), nbytes)
        return value


@dataclass(frozen=True)
class ScanFacts:
    """What a plan of a scan says before it lists any split."""

    schema: pa.Schema
    pinned: PinnedScan


class TableFacts:
    """The schemas, pinned scans and metadata counts of recent statements' scans (see the module docstring)."""

    def __init__(
        self, max_bytes: int = SqlSection.table_facts_cache_bytes, listener: CacheListener | None = None
    ):
        self._scans: PerState[ScanFacts] = PerState("sql_scan_facts", max_bytes, _scan_bytes, listener)
        self._counts: PerState[tuple[PinnedScan, int] | None] = PerState(
            "sql_metadata_counts", max_bytes, _count_bytes, listener
        )

    def scan(self, call: Call, identifier: str, options: ReadOptions) -> ScanFacts:
        """The result schema and pinned scan of reading table ``identifier`` with ``options``, as
        ``call`` sees the table. A metadata table's identifier (``ns.t$timeline``,
        :mod:`.names`) is pinned, not planned: its schema is fixed."""
        meta = meta_reference(call, identifier)
        if meta is not None and meta.meta is not None:
            pinned = call.pin_meta(call.open_entry(meta.entry), meta.meta, options.as_of)
            return ScanFacts(META_TABLES[meta.meta].schema, pinned)

        def planned() -> ScanFacts:
            plan = call.plan(identifier, options)
            return ScanFacts(plan.schema, plan.pinned)

        return self._scans.get(call.open(identifier), options, planned)

    def schema(self, call: Call, identifier: str, options: ReadOptions) -> pa.Schema:
        """The result schema of reading table ``identifier`` with ``options`` (:meth:`scan`)."""
        return self.scan(call, identifier, options).schema

    def count(
        self, call: Call, identifier: str, options: ReadOptions, count: Callable[[PlannedScan], int | None]
    ) -> tuple[PinnedScan, int] | None:
        """The pinned scan of ``options`` on table ``identifier`` and its rows by ``count``
        (``None``: count by reading), planned and counted once per table state."""

        def counted() -> tuple[PinnedScan, int] | None:
            planned = call.plan(identifier, options)
            rows = count(planned)
            return None if rows is None else (planned.pinned, rows)

        return self._counts.get(call.open(identifier), options, counted)


def _scan_bytes(facts: ScanFacts) -> int:
    return facts.schema.serialize().size + _pinned_bytes(facts.pinned)


def _count_bytes(counted: tuple[PinnedScan, int] | None) -> int:
    return 0 if counted is None else _pinned_bytes(counted[0]) + 32


def _pinned_bytes(pinned: PinnedScan) -> int:
    return len(pinned.key) + 128


__all__ = ["ENTRY_OVERHEAD", "PerState", "ScanFacts", "TableFacts"]
