"""Decoded Parquet row groups of point reads, kept for the next lookup in the same file.

A point read (record-key equality) needs one row, yet Parquet decodes whole pages: with the
usual one page per column chunk, every column of the row group. That decoding is most of a
warm point query's CPU, so the decoded row group is kept (the "uncompressed block cache" of
key-value stores, for short lookups). Safe because base files are immutable: the key is the
file's full path and size, the row group and the columns decoded. Footers are kept beside them,
so a hit opens no file, and whether a row group's key column holds any value twice (a lookup of
one key then stops at its first match). Bounded in bytes; only readers given a cache use it (the planner hands
it to point reads only, so scans never churn it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Hashable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from catalog.lru import BoundedLRU, CacheListener, CacheStats
from catalog.storage import Storage

#: what a kept footer is charged beyond its serialized size (the Python and C++ objects)
_FOOTER_OVERHEAD = 512
#: what a kept "the key column is unique" flag is charged (its key and entry)
_FLAG_BYTES = 256


@dataclass(frozen=True)
class ParquetFooter:
    """A base file's footer and the Arrow schema it describes."""

    metadata: pq.FileMetaData
    schema: pa.Schema


class DecodedRowGroups:
    """Decoded row groups (``pa.Table``) and footers of immutable Parquet files; thread safe.

    Args:
        max_bytes: the bound of decoded bytes and footers together (0: keep nothing).
        listener: hears the hits, misses and evictions (see :class:`~catalog.lru.BoundedLRU`).
    """

    def __init__(self, max_bytes: int, listener: CacheListener | None = None):
        self._lru: BoundedLRU[Hashable, ParquetFooter | pa.Table | bool] = BoundedLRU(
            "point_reads", max_bytes, listener=listener
        )

    def __reduce__(self) -> tuple[type["DecodedRowGroups"], tuple[int]]:
        """A cache travels (pickled with a read context) as its bound, empty."""
        return DecodedRowGroups, (self._lru.max_bytes,)

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

    def row_group(
        self, file: tuple[str, int | None], index: int, columns: tuple[str, ...], read: Callable[[], pa.Table]
    ) -> pa.Table:
        """Row group ``index`` of ``file`` decoded in ``columns``, ``read`` on a miss."""
        key = (file, index, columns)
        hit = self._lru.get(key)
        if isinstance(hit, pa.Table):
            return hit
        table = read()
        self._lru.put(key, table, table.nbytes)
        return table

    def unique(self, file: tuple[str, int | None], index: int, column: str, values: pa.ChunkedArray) -> bool:
        """Whether the non-null ``values`` of ``column`` in row group ``index`` of ``file`` are all
        distinct (counted once, then kept): a lookup of one key then stops at its first match."""
        key = (file, index, column, "unique")
        hit = self._lru.get(key)
        if isinstance(hit, bool):
            return hit
        distinct = pc.count_distinct(values, mode="only_valid").as_py()
        unique = distinct == len(values) - values.null_count
        self._lru.put(key, unique, _FLAG_BYTES)
        return unique

    def stats(self) -> CacheStats:
        return self._lru.stats()


@dataclass(frozen=True)
class PointLookup:
    """A read of a few record keys, through a cache of decoded row groups.

    Attributes:
        cache: where the decoded row groups are kept.
        column: the record key column.
        keys: the record keys looked up; a row group's rows are narrowed to them first (a hash
            lookup, no query plan).
        exact: the keys are the whole row filter (only ``=`` / ``in`` on the record key; filter
            values are never null): the narrowed rows are the answer, no filter runs after.
    """

    cache: DecodedRowGroups
    column: str
    keys: tuple[str, ...]
    exact: bool


__all__ = ["DecodedRowGroups", "ParquetFooter", "PointLookup"]
