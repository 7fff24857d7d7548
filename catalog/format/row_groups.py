"""Decoded Parquet columns of filtered reads, kept for the next query of the same file.

A point read (record-key equality) needs one row, yet Parquet decodes whole pages: with the
usual one page per column chunk, every column of the row group. That decoding is most of a
warm point query's CPU, so the decoded columns are kept (the "uncompressed block cache" of
key-value stores, for short lookups); any other filter read keeps the columns it tests and the
columns of the row groups holding matches the same way (:mod:`catalog.format.parquet_cached`).
Safe because base files are immutable: the key is the file's full path and size, the row group
and the column (with the leaves decoded of a struct projected in part). Footers are kept beside
them, so a hit opens no file, and what a row group's key column allows a lookup of one key (see
:class:`KeyColumn`). Bounded in bytes; a reader is given it beside its read task
(:class:`catalog.format.caches.ReadCaches`) and uses it for filtered reads only, so scans never
churn it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Hashable, Mapping

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from catalog.lru import BoundedLRU, CacheListener, CacheStats
from catalog.storage import Storage

#: what a kept footer is charged beyond its serialized size (the Python and C++ objects)
_FOOTER_OVERHEAD = 512
#: what a kept :class:`KeyColumn` is charged (its key and entry)
_FLAG_BYTES = 256
#: batches of at most this many rows are narrowed to a lookup's keys in Python (:meth:`PointLookup.rows_of`)
_FEW_ROWS = 16


@dataclass(frozen=True)
class ParquetFooter:
    """A base file's footer and the Arrow schema it describes."""

    metadata: pq.FileMetaData
    schema: pa.Schema


@dataclass(frozen=True)
class KeyColumn:
    """What a row group's record key column allows a lookup of one key.

    Attributes:
        unique: its non-null values are all distinct: a scan stops at the first match.
        ascending: one chunk of non-null values in ascending order (a base file Hudi wrote
            sorted by record key): a binary search finds the key (and its duplicates next to it).
    """

    unique: bool
    ascending: bool


def _ascending(values: pa.ChunkedArray) -> bool:
    """One chunk (or none) of non-null strings in ascending order (UTF-8 byte order is the order
    of Python's ``str``, which a binary search compares with)."""
    string = pa.types.is_string(values.type) or pa.types.is_large_string(values.type)
    if not string or values.null_count or values.num_chunks > 1:
        return False
    if len(values) < 2:
        return True
    array = values.chunk(0)
    return bool(pc.all(pc.less_equal(array.slice(0, len(array) - 1), array.slice(1))).as_py())


class DecodedRowGroups:
    """Decoded columns of row groups and footers of immutable Parquet files; thread safe.

    Args:
        max_bytes: the bound of decoded bytes and footers together (0: keep nothing).
        listener: hears the hits, misses and evictions (see :class:`~catalog.lru.BoundedLRU`).
    """

    def __init__(self, max_bytes: int, listener: CacheListener | None = None):
        self._lru: BoundedLRU[Hashable, ParquetFooter | pa.ChunkedArray | KeyColumn] = BoundedLRU(
            "point_reads", max_bytes, listener=listener
        )

    @staticmethod
    def file_key(storage: Storage, path: str, size: int | None) -> tuple[str, int | None]:
        """One key per file version: the normalised full path (aliases share it) and the size."""
        return storage.file_uri(path), size

    def footer(self, file: tuple[str, int | None], read: Callable[[], pq.FileMetaData]) -> ParquetFooter:
        """The footer of ``file``, ``read`` on a miss."""
        hit = self._lru.get(file)
        if isinstance(hit, ParquetFooter):
            return hit
        metadata = read()
        footer = ParquetFooter(metadata, metadata.schema.to_arrow_schema())
        self._lru.put(file, footer, int(metadata.serialized_size) + _FOOTER_OVERHEAD)
        return footer

    def columns(
        self,
        file: tuple[str, int | None],
        index: int,
        wanted: Mapping[str, tuple[str, ...]],
        read: Callable[[list[str]], pa.Table],
    ) -> pa.Table:
        """Row group ``index`` of ``file`` decoded in the columns of ``wanted`` (top-level name ->
        the paths decoded for it: ``(name,)`` for the whole column, else the leaves of a struct
        projected in part), each column kept on its own, so queries naming other columns share
        it. The columns not kept are decoded together by ``read(paths)`` (a table of top-level
        columns) and kept."""
        keys = {name: (file, index, name, paths) for name, paths in wanted.items()}
        found: dict[str, pa.ChunkedArray] = {}
        for name, key in keys.items():
            hit = self._lru.get(key)
            if isinstance(hit, pa.ChunkedArray):
                found[name] = hit
        missing = [name for name in wanted if name not in found]
        if missing:
            table = read([path for name in missing for path in wanted[name]])
            for name in missing:
                column = table.column(name)
                found[name] = column
                self._lru.put(keys[name], column, column.nbytes)
        return pa.table([found[name] for name in wanted], names=list(wanted))

    @property
    def max_bytes(self) -> int:
        return self._lru.max_bytes

    def key_column(self, file: tuple[str, int | None], index: int, column: str, values: pa.ChunkedArray) -> "KeyColumn":
        """What the ``values`` of the record key ``column`` in row group ``index`` of ``file``
        allow a lookup of one key (checked once, then kept)."""
        key = (file, index, column, "key column")
        hit = self._lru.get(key)
        if isinstance(hit, KeyColumn):
            return hit
        distinct = pc.count_distinct(values, mode="only_valid").as_py()
        facts = KeyColumn(unique=distinct == len(values) - values.null_count, ascending=_ascending(values))
        self._lru.put(key, facts, _FLAG_BYTES)
        return facts

    def stats(self) -> CacheStats:
        return self._lru.stats()


@dataclass(frozen=True)
class PointLookup:
    """A read of a few record keys (a plain value of the read task; a reader given a
    :class:`DecodedRowGroups` decodes the row groups it reads through it).

    Attributes:
        column: the record key column.
        keys: the record keys looked up; a row group's rows are narrowed to them first (a hash
            lookup, no query plan).
        exact: the keys are the whole row filter (only ``=`` / ``in`` on the record key; filter
            values are never null): the narrowed rows are the answer, no filter runs after.
    """

    column: str
    keys: tuple[str, ...]
    exact: bool

    def rows_of(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The rows of ``batch`` whose :attr:`column` holds one of :attr:`keys`: when the lookup
        is :attr:`exact`, the rows its row filter keeps (``=`` / ``in`` on non-null keys, the
        ``in`` sets intersected), without a query plan. A few rows (a point read's merged rows)
        are compared in Python: cheaper than any Arrow kernel call on them."""
        values = batch.column(self.column)
        if batch.num_rows > _FEW_ROWS:
            return batch.filter(pc.is_in(values, value_set=pa.array(self.keys, values.type)))
        wanted = set(self.keys)
        rows = [row for row, value in enumerate(values.to_pylist()) if value in wanted]
        if len(rows) == batch.num_rows:
            return batch
        return batch.take(pa.array(rows, pa.int64())) if rows else batch.slice(0, 0)


__all__ = ["DecodedRowGroups", "KeyColumn", "ParquetFooter", "PointLookup"]
