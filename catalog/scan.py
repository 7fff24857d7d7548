"""A planned read of a table: options, pinned instant, file slices, and per-slice reading.

One code path for the library, the Flight service and Spark: ``plan_slices()`` lists the units
of work and ``read_slice()`` turns one unit into the exact rows of this query.
"""

from __future__ import annotations

import os
import queue
import threading
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from .base_reader import conform_batch, read_parquet
from .commit_metadata import written_file_groups
from .exceptions import ColumnNotFoundError, InvalidInstantError, InvalidQueryError, UnsupportedTableError
from .file_slices import FileSlice
from .filters import BoundFilter, bind_filters, to_expression
from .timeline import validate_instant

if TYPE_CHECKING:
    from .table import HudiTable

QUERY_TYPES = ("snapshot", "read_optimized", "incremental")
COMMIT_TIME_COLUMN = "_hoodie_commit_time"
PARTITION_BATCH = 256
_WORKERS = max(2, min(8, (os.cpu_count() or 2) * 2))  # IO-bound: a few threads per core


@dataclass(frozen=True)
class ScanOptions:
    """What to read; every field has the meaning given in interfaces.md section 1."""

    columns: tuple[str, ...] | None = None
    filters: tuple[Any, ...] = ()
    query_type: str = "snapshot"
    as_of: str | None = None
    start: str | None = None
    end: str | None = None
    limit: int | None = None

    @classmethod
    def create(
        cls,
        columns: Sequence[str] | None = None,
        filters: Sequence[Any] | None = None,
        query_type: str | None = "snapshot",
        as_of: str | None = None,
        start: str | None = None,
        end: str | None = None,
        limit: int | None = None,
    ) -> "ScanOptions":
        if columns is not None and (isinstance(columns, str) or not all(isinstance(c, str) for c in columns)):
            raise InvalidQueryError(f"columns must be a list of column names, got {columns!r}")
        if filters is not None and not isinstance(filters, (list, tuple)):
            raise InvalidQueryError(f"filters must be a list of (column, op, value) tuples, got {filters!r}")
        qt = (query_type or "snapshot").strip().lower().replace("-", "_")
        if qt not in QUERY_TYPES:
            raise InvalidQueryError(f"unknown query_type {query_type!r}; expected one of {', '.join(QUERY_TYPES)}")
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
            raise InvalidQueryError(f"limit must be a non-negative integer, got {limit!r}")
        if qt != "incremental" and (start is not None or end is not None):
            raise InvalidQueryError("start/end apply only to query_type='incremental'")
        if qt == "incremental" and as_of is not None:
            raise InvalidQueryError("as_of does not apply to incremental queries; use start/end")
        for name, value in (("as_of", as_of), ("start", start), ("end", end)):
            if value is not None:
                validate_instant(value, name)
        if filters is not None and len(filters) in (2, 3) and isinstance(filters[0], str):
            filters = [filters]  # a single (column, op, value) tuple
        return cls(
            tuple(columns) if columns is not None else None,
            tuple(tuple(f) if isinstance(f, list) else f for f in (filters or ())),
            qt,
            as_of,
            start,
            end,
            limit,
        )


@dataclass(frozen=True)
class TableScan:
    """An immutable, planned query over one table (built by ``HudiTable.scan``)."""

    table: "HudiTable"
    options: ScanOptions = field(default_factory=ScanOptions)

    def __post_init__(self) -> None:
        # Validate everything before any data IO.
        if self.options.query_type == "incremental" and not self.table.config.populate_meta_fields:
            # Java Hudi refuses these (no commit times to filter on); hudi-rs returns whole file groups.
            raise UnsupportedTableError("incremental queries are not supported when meta fields are disabled")
        _ = self.filters, self.output_schema(), self.instant

    def update(self, **overrides: Any) -> "TableScan":
        """A copy with some options replaced (``limit=10``, ``columns=[...]``, ...)."""
        return TableScan(self.table, replace(self.options, **overrides))

    # -- query facts --------------------------------------------------------------------
    @cached_property
    def filters(self) -> list[BoundFilter]:
        return bind_filters(list(self.options.filters), self.table.schema)

    @cached_property
    def incremental_instants(self) -> list[str]:
        """Requested times of the commits an incremental query returns (format doc 7.5)."""
        if self.options.query_type != "incremental":
            return []
        return [i.requested_time for i in self.table.timeline.instants_in_range(self.options.start, self.options.end)]

    @cached_property
    def instant(self) -> str | None:
        """The pinned query instant (requested time); ``None`` for a table without commits."""
        timeline = self.table.timeline
        commits = timeline.commits
        opts = self.options
        if opts.as_of is not None:
            if not commits or opts.as_of < commits[0].requested_time:
                first = commits[0].requested_time if commits else "none"
                raise InvalidInstantError(
                    f"as_of {opts.as_of} is before the table's first commit ({first})"
                )
            return opts.as_of
        if opts.query_type == "incremental":
            chosen = self.incremental_instants
            return max(chosen) if chosen else None
        return commits[-1].requested_time if commits else None

    @property
    def read_optimized(self) -> bool:
        return self.options.query_type == "read_optimized"

    def output_schema(self) -> pa.Schema:
        schema = self.table.schema
        if self.options.columns is None:
            return schema
        missing = [c for c in self.options.columns if schema.get_field_index(c) < 0]
        if missing:
            raise ColumnNotFoundError(f"column(s) not in the table schema: {', '.join(map(repr, missing))}")
        return pa.schema([schema.field(c) for c in self.options.columns], metadata=schema.metadata)

    @cached_property
    def read_schema(self) -> pa.Schema:
        """Output columns plus those the row filters and the incremental filter need."""
        out = self.output_schema()
        extra = [f.column for f in self.filters]
        if self.options.query_type == "incremental":
            extra.append(COMMIT_TIME_COLUMN)
        names = list(out.names) + [c for c in dict.fromkeys(extra) if c not in out.names]
        schema = self.table.schema
        return pa.schema([schema.field(n) for n in names], metadata=schema.metadata)

    @cached_property
    def _row_filter(self) -> tuple[pc.Expression | None, list[str]]:
        expr = to_expression(self.filters)
        columns = [f.column for f in self.filters]
        if self.options.query_type == "incremental":
            col = pc.field(COMMIT_TIME_COLUMN)
            if self.table.table_version >= 8:
                cond = col.isin(pa.array(self.incremental_instants, pa.string()))
            else:
                cond = pc.scalar(True)
                if self.options.start is not None:
                    cond = cond & (col > self.options.start)
                if self.options.end is not None:
                    cond = cond & (col <= self.options.end)
            expr = cond if expr is None else expr & cond
            columns.append(COMMIT_TIME_COLUMN)
        return expr, columns

    # -- planning -----------------------------------------------------------------------
    @cached_property
    def _incremental_groups(self) -> set[tuple[str, str]]:
        timeline = self.table.timeline
        groups: set[tuple[str, str]] = set()
        for requested in self.incremental_instants:
            inst = timeline.get(requested)
            if inst is None:
                continue
            groups |= written_file_groups(timeline.commit_metadata(inst))
        return groups

    def plan_partitions(self) -> list[str]:
        """Partitions that may hold matching rows, after pruning on partition values."""
        if self.instant is None:
            return []
        listing = self.table.listing
        partitions = self.table.partition_scheme.prune(listing.list_partitions(), self.filters)
        prune = getattr(listing, "prune_partitions", None)  # optional capability, see listing.py
        if prune is not None and self.filters:
            partitions = list(prune(partitions, self.filters, instant=self.instant))
        if self.options.query_type == "incremental":
            touched = {p for p, _ in self._incremental_groups}
            partitions = [p for p in partitions if p in touched]
        return partitions

    def plan_slices(self) -> Iterator[FileSlice]:
        """File slices to read, pruned, streamed a batch of partitions at a time."""
        partitions = self.plan_partitions()
        incremental = self.options.query_type == "incremental"
        prune = getattr(self.table.listing, "prune_slices", None)  # optional capability, see listing.py
        for i in range(0, len(partitions), PARTITION_BATCH):
            chunk = partitions[i : i + PARTITION_BATCH]
            slices = self.table.fs_view.latest_file_slices(chunk, self.instant, self.read_optimized)
            if incremental:
                slices = (fs for fs in slices if (fs.partition, fs.file_id) in self._incremental_groups)
            if prune is not None and self.filters:
                slices = prune(list(slices), self.filters, instant=self.instant)
            yield from slices

    # -- reading ------------------------------------------------------------------------
    def read_base(
        self, fs: FileSlice, schema: pa.Schema, row_groups: Sequence[int] | None = None,
        filter: pc.Expression | None = None, filter_columns: Sequence[str] = (),
    ) -> Iterator[pa.RecordBatch]:
        """Batches of the slice's base file in ``schema`` (exposed for the MOR merge)."""
        if fs.base_file is None:
            return iter(())
        constants = None
        if self.table.config.drop_partition_columns:
            constants = self.table.partition_scheme.typed_values(fs.partition)
        return read_parquet(
            self.table.storage,
            # A fresh pyarrow wrapper per file: a PyFileSystem that outlives the read (cached on
            # the table) can abort the interpreter when it is finalised at exit.
            self.table.storage.arrow_filesystem(),
            fs.base_file_path,  # type: ignore[arg-type]
            schema,
            size=fs.base_file.size,
            row_groups=row_groups,
            filter=filter,
            filter_columns=filter_columns,
            constants=constants,
        )

    def read_slice(self, fs: FileSlice, row_groups: list[int] | None = None) -> Iterator[pa.RecordBatch]:
        """The exact rows of one slice for this query, as batches of ``output_schema()``."""
        out_schema = self.output_schema()
        expr, filter_columns = self._row_filter
        if fs.has_logs and not self.read_optimized:
            batches = self._merged(fs, row_groups)
            for batch in batches:
                batch = conform_batch(batch, self.read_schema)
                if expr is not None:
                    batch = _filter_batch(batch, expr)
                if batch.num_rows:
                    yield _select(batch, out_schema)
            return
        for batch in self.read_base(fs, self.read_schema, row_groups, expr, filter_columns):
            yield _select(batch, out_schema)

    def _merged(self, fs: FileSlice, row_groups: list[int] | None) -> Iterator[pa.RecordBatch]:
        """MOR seam: ``catalog.merge.merge_file_slice(scan, file_slice, row_groups)`` yields the
        merged rows of the slice (any subset/superset of table columns; they are conformed to
        ``read_schema`` by name), honouring ``scan.instant`` for which log blocks count."""
        try:
            from .merge import merge_file_slice
        except ImportError:
            raise UnsupportedTableError("merge-on-read snapshot with log files not available") from None
        return merge_file_slice(self, fs, row_groups)

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """All result batches, streamed; slices are read by a few threads in parallel.

        Memory stays bounded: at most ``_QUEUE_BATCHES`` finished batches wait in the queue,
        plus one batch in the hands of each worker.
        """
        remaining = self.options.limit
        if remaining == 0:
            return
        for batch in _parallel(self.plan_slices(), self.read_slice, _WORKERS):
            if remaining is not None:
                if batch.num_rows >= remaining:
                    yield batch.slice(0, remaining)
                    return
                remaining -= batch.num_rows
            yield batch

    def to_arrow(self) -> pa.Table:
        return pa.Table.from_batches(list(self.to_batches()), schema=self.output_schema())

    def to_reader(self) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(self.output_schema(), self.to_batches())


_DONE = object()
_QUEUE_BATCHES = 16


def _parallel(items: Iterator[Any], read: Any, workers: int) -> Iterator[pa.RecordBatch]:
    """``read(item)`` for every item on ``workers`` threads, batches yielded as they come.

    Errors in a worker are re-raised here; closing the generator early stops the workers.
    """
    out: queue.Queue = queue.Queue(maxsize=_QUEUE_BATCHES)
    stop = threading.Event()
    lock = threading.Lock()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                out.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        try:
            while not stop.is_set():
                with lock:  # planning is a lazy iterator too: one thread advances it at a time
                    item = next(items, _DONE)
                if item is _DONE:
                    break
                for batch in read(item):
                    if not put(batch):
                        return
        except BaseException as err:  # noqa: BLE001 - handed to the consumer thread
            put(err)
        finally:
            put(_DONE)

    threads = [threading.Thread(target=work, name=f"hudi-scan-{i}", daemon=True) for i in range(workers)]
    for t in threads:
        t.start()
    finished = 0
    try:
        while finished < workers:
            item = out.get()
            if item is _DONE:
                finished += 1
            elif isinstance(item, BaseException):
                raise item
            else:
                yield item
    finally:
        stop.set()
        for t in threads:
            t.join()


def _filter_batch(batch: pa.RecordBatch, expr: pc.Expression) -> pa.RecordBatch:
    table = pa.Table.from_batches([batch]).filter(expr)
    return table.combine_chunks().to_batches()[0] if table.num_rows else batch.slice(0, 0)


def _select(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    if batch.schema.names == schema.names:
        return batch
    return batch.select(schema.names)  # keeps num_rows even for an empty projection (count queries)


__all__ = ["QUERY_TYPES", "ScanOptions", "TableScan"]
