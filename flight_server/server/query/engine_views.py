"""The views of an engine statement, built once from its ticket's pinned scans.

Each view reads one table at its pinned scan: a metadata table's rows (``catalog.meta``); the
planned Parquet base files as a dataset the engine reads itself, when the reader would return
them unchanged (``ScanPlan.to_dataset``); else the planned splits, read here through the split
result cache as split tickets are. A scan's splits are listed once for both. What reading the
views meets travels with them, as data: the first error a streamed view raises (kept by the
engine's door, :class:`~flight_server.server.engine.sandbox.Views`, and told as every read tells
it) and the corrupt log blocks skipped while the engine's threads read a table (relayed to the
stream's thread, whose collector turns them into the stream's ``app_metadata``).

The views are built when the engine admits the statement (:meth:`StatementViews.build` is what
``SandboxedEngine.run`` calls), so listing splits and a metadata table's rows are admitted work.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Iterator, Sequence

import pyarrow as pa

from catalog.format.log_file import collecting_corrupt_blocks, relay_corrupt_block_notes
from catalog.meta import SEPARATOR
from catalog.plan.dataset import Fragments
from flight_server.server.engine.sandbox import View, Views
from flight_server.server.query.queries import Call
from flight_server.server.query.tickets import PinnedScan


class ScanRoutes:
    """How many views of engine statements the engine scanned natively, and how many were fed
    through Python (``ScanPlan.to_dataset``)."""

    def __init__(self) -> None:
        self.native = 0
        self.streamed = 0
        self._lock = threading.Lock()

    def count(self, native: bool) -> None:
        with self._lock:
            if native:
                self.native += 1
            else:
                self.streamed += 1


class StatementViews:
    """The views of one statement (built once, by :meth:`build`) and what reading them told.

    Args:
        call: the RPC reading them (its rights were checked for every scan).
        scans: each view's name in the engine SQL and its pinned scan.
        fragments: the base files' fragments native scans keep; ``None``: every view streams.
        routes: counts the views by route.

    Attributes:
        sources: each view's table (a metadata table: ``ns.t$name``) and schema, once built.
    """

    def __init__(
        self, call: Call, scans: Sequence[tuple[str, PinnedScan]], fragments: Fragments | None, routes: ScanRoutes
    ):
        self._call = call
        self._scans = scans
        self._fragments = fragments
        self._routes = routes
        self.sources: tuple[tuple[str, pa.Schema], ...] = ()
        self._notes = _EngineThreadNotes()

    def build(self) -> Views:
        views, sources = [], []
        for name, scan in self._scans:
            if scan.meta is not None:
                rows = self._call.meta_rows(scan)
                views.append(View(name, pa.RecordBatchReader.from_batches(rows.schema, rows.to_batches())))
                sources.append((scan.table + SEPARATOR + scan.meta, rows.schema))
                continue
            listed = self._call.listed(scan)
            splits = list(listed.splits)  # listed once: for the dataset, else for the stream
            native = None
            if self._fragments is not None:
                native = dataclasses.replace(listed, splits=iter(splits)).to_dataset(self._fragments)
            self._routes.count(native is not None)
            if native is not None:
                views.append(View(name, native, scan.table))
            else:
                batches = self._call.read(dataclasses.replace(listed, splits=iter(splits)), scan)
                reader = pa.RecordBatchReader.from_batches(listed.schema, self._notes.collecting(batches))
                views.append(View(name, reader, scan.table))
            sources.append((scan.table, listed.schema))
        self.sources = tuple(sources)
        return Views(tuple(views))

    def relayed(self, results: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """``results``, with the corrupt log blocks the engine's threads skipped reading the
        views told to the stream's thread (see :class:`_EngineThreadNotes`)."""
        return self._notes.relayed(results)


class _EngineThreadNotes:
    """Corrupt log blocks skipped while the engine's threads read the tables, told to the
    stream's thread (whose collector turns them into the stream's ``app_metadata``, as on the JSON
    path): they would otherwise reach only the server log."""

    def __init__(self) -> None:
        self._pending: list[str] = []
        self._lock = threading.Lock()
        self._relaying = threading.local()  # set on the stream's thread while it advances the engine

    def collecting(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """``batches``, keeping the notes of reading them on a thread other than the stream's."""
        while True:
            with collecting_corrupt_blocks() as found:
                batch = next(batches, None)
            if found and not getattr(self._relaying, "active", False):  # else the stream's collector has them
                with self._lock:
                    self._pending.extend(found)
            if batch is None:
                return
            yield batch

    def relayed(self, results: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """``results``, handing the kept notes to the stream's collector before each batch and at the end."""
        while True:
            self._relaying.active = True
            try:
                batch = next(results, None)
            finally:
                self._relaying.active = False
            with self._lock:
                pending, self._pending = self._pending, []
            relay_corrupt_block_notes(pending)
            if batch is None:
                return
            yield batch


__all__ = ["ScanRoutes", "StatementViews"]
