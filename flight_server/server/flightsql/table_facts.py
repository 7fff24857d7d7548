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
no longer cached is not kept alive by them (a weak reference), and both are bounded.
"""

from __future__ import annotations

import json
import weakref
from dataclasses import dataclass
from typing import Callable, Generic, TypeVar

import pyarrow as pa

from catalog.lru import BoundedLRU
from catalog.meta import META_TABLES
from catalog.plan.options import ReadOptions
from catalog.state import TableState
from flight_server.server.flightsql.names import meta_reference
from flight_server.server.query.queries import Call, OpenTable, PlannedScan
from flight_server.server.query.tickets import PinnedScan

#: entries kept by each (an entry is a table's identifier, its options' text and its value)
PER_STATE_ENTRIES = 1024
V = TypeVar("V")


class PerState(Generic[V]):
    """Values by table and read options, each valid for the table state it was made from."""

    def __init__(self, name: str, entries: int = PER_STATE_ENTRIES):
        self._kept: BoundedLRU[tuple[str, str, str], tuple[weakref.ref[TableState], V]] = BoundedLRU(name, entries)

    def get(self, table: OpenTable, options: ReadOptions, make: Callable[[], V]) -> V:
        """The value for ``options`` on ``table``: kept for its state, else ``make()`` (kept
        when it returns; an error is not kept)."""
        key = (table.entry.identifier, table.entry.base_uri, json.dumps(options.to_json(), sort_keys=True))
        kept = self._kept.get(key)
        if kept is not None and kept[0]() is table.state:
            return kept[1]
        value = make()
        self._kept.put(key, (weakref.ref(table.state), value), 1)
        return value


@dataclass(frozen=True)
class ScanFacts:
    """What a plan of a scan says before it lists any split."""

    schema: pa.Schema
    pinned: PinnedScan


class TableFacts:
    """The schemas, pinned scans and metadata counts of recent statements' scans (see the module docstring)."""

    def __init__(self, entries: int = PER_STATE_ENTRIES):
        self._scans: PerState[ScanFacts] = PerState("sql scan facts", entries)
        self._counts: PerState[tuple[PinnedScan, int] | None] = PerState("sql metadata counts", entries)

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


__all__ = ["PerState", "ScanFacts", "TableFacts"]
