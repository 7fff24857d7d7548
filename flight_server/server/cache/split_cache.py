"""Split results: the Arrow record batches of one split, kept for the next identical ticket.

Safe because a split names immutable files (names and sizes) and the read is pinned: the key is
the table, the file slice (every file's name and size), the row groups, the instant, the commit
set that decides which log blocks count, and the query (columns, read schema, filters,
read-optimized, the range of a CDC query). Bounded in bytes (``split_cache_bytes``; 0, the default, turns it off); a
result larger than ``split_cache_entry_bytes``, one cut short (cancelled, failed) or one that
skipped corrupt log blocks (whose notes a replay would not repeat) is not kept.
"""

from __future__ import annotations

from typing import Hashable, Iterator

import pyarrow as pa

from catalog.format.caches import ReadCaches
from catalog.format.log_file import collecting_corrupt_blocks
from catalog.lru import BoundedLRU, CacheListener, CacheStats
from catalog.read.context import ReadContext
from catalog.read.split_reader import read_split
from catalog.table.files import Split


def split_key(context: ReadContext, split: Split) -> Hashable:
    """What a split's result depends on."""
    fs = split.file_slice
    base = (fs.base_file.name, fs.base_file.size) if fs.base_file is not None else None
    files = (fs.partition, fs.file_id, fs.base_instant, base, tuple((lf.name, lf.size) for lf in fs.log_files))
    query = (
        context.instant,
        context.read_optimized,
        context.output_schema.to_string(show_schema_metadata=False),
        context.read_schema.to_string(show_schema_metadata=False),
        str(context.row_filter) if context.row_filter is not None else None,
        context.schema_history is not None,
        context.cdc.key if context.cdc is not None else None,
    )
    return (context.storage.uri, files, split.start, split.length, split.row_groups, context.commits, query)


class SplitResultCache:
    """Record batches of whole split reads, by :func:`split_key`."""

    def __init__(self, max_bytes: int, max_entry_bytes: int, listener: CacheListener | None = None):
        self._lru: BoundedLRU[Hashable, list[pa.RecordBatch]] = BoundedLRU(
            "split_results", max_bytes, max_entry_bytes, listener
        )

    def read(self, context: ReadContext, split: Split, caches: ReadCaches) -> Iterator[pa.RecordBatch]:
        """The batches of ``split``: from the cache, or read through ``caches`` (and kept if they
        qualify)."""
        if self._lru.max_bytes == 0:
            return read_split(context, split, caches)
        key = split_key(context, split)
        hit = self._lru.get(key)
        if hit is not None:
            return iter(hit)
        return self._filling(key, read_split(context, split, caches))

    def _filling(self, key: Hashable, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        kept: list[pa.RecordBatch] | None = []
        size = 0
        it = iter(batches)
        while True:
            with collecting_corrupt_blocks() as notes:
                batch = next(it, None)
            if notes:
                kept = None
            if batch is None:
                break
            if kept is not None:
                size += batch.nbytes
                if size > self._lru.max_entry_bytes:
                    kept = None
                else:
                    kept.append(batch)
            yield batch
        if kept is not None:
            self._lru.put(key, kept, size)

    def stats(self) -> CacheStats:
        return self._lru.stats()


__all__ = ["SplitResultCache", "split_key"]
