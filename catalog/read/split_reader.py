"""Reading splits: the exact rows of one split for a query, and of many splits in parallel.

:func:`read_split` is the one per-split reader: the library, a Flight ``do_get`` and any other
process holding a :class:`ReadContext` and a :class:`Split` (the read task) run it, through the
caches that process gives it (:class:`~catalog.format.caches.ReadCaches`). It merges log files
(merge-on-read), applies the row filter (query filters and the incremental commit-time filter),
projects and casts to the output schema.
"""

from __future__ import annotations

import os
from typing import Callable, Iterable, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from catalog.format.caches import NO_CACHES, ReadCaches
from catalog.format.log_file import collecting_corrupt_blocks, relay_corrupt_block_notes
from catalog.format.parquet import conform_batch, rows_matching
from catalog.parallel import bounded_parallel
from catalog.read.cdc import read_cdc_split
from catalog.read.context import ReadContext
from catalog.read.cow import read_base
from catalog.read.mor_slice import merge_file_slice
from catalog.table.files import Split

#: IO-bound: a few threads per core
DEFAULT_WORKERS = max(2, min(8, (os.cpu_count() or 2) * 2))
_QUEUE_BATCHES = 16
#: how one split is read (through the given caches): :func:`read_split`, or a cache in front of it
SplitRead = Callable[[ReadContext, Split, ReadCaches], Iterator[pa.RecordBatch]]


def read_split(ctx: ReadContext, split: Split, caches: ReadCaches = NO_CACHES) -> Iterator[pa.RecordBatch]:
    """The exact rows of ``split`` for the query of ``ctx``, as batches of ``ctx.output_schema``,
    read through ``caches``."""
    if ctx.cdc is not None:
        yield from read_cdc_split(ctx, split, caches, read_split)
        return
    fs = split.file_slice
    row_groups = split.row_groups
    out_schema = ctx.output_schema
    if fs.has_logs and not ctx.read_optimized:
        for batch in merge_file_slice(ctx, fs, row_groups, caches):
            batch = conform_batch(batch, ctx.read_schema)
            if ctx.point is not None and ctx.point.exact:
                batch = ctx.point.rows_of(batch)  # the filter is the keys: no query plan per batch
            elif ctx.row_filter is not None:
                batch = _filter_batch(batch, ctx.row_filter)
            if batch.num_rows:
                yield _select(batch, out_schema)
        return
    for batch in read_base(ctx, fs, ctx.read_schema, row_groups, ctx.row_filter, ctx.filter_columns, caches):
        yield _select(batch, out_schema)


def read_splits(
    ctx: ReadContext,
    splits: Iterable[Split],
    limit: int | None = None,
    workers: int = DEFAULT_WORKERS,
    read: SplitRead = read_split,
    caches: ReadCaches = NO_CACHES,
) -> Iterator[pa.RecordBatch]:
    """Every split's rows, read by ``workers`` threads, batches yielded as they come (any order).

    ``splits`` may be a lazy iterator (planning streams): workers take the next split as they
    free up. Memory stays bounded: at most ``_QUEUE_BATCHES`` finished batches wait, plus one
    batch in the hands of each worker. At most ``limit`` rows are returned. A single split (a
    sequence of one) is read on the calling thread.

    Log blocks the workers skip as corrupt are relayed to this (the consuming) thread's
    :func:`~catalog.format.log_file.collecting_corrupt_blocks` before the batch that follows
    them, so a Flight stream reports them as it does for a single split.

    ``read`` reads one split through ``caches`` (a server reads through its split result cache).
    """
    if limit == 0:
        return
    remaining = limit
    if isinstance(splits, Sequence) and len(splits) <= 1:
        batches: Iterator[pa.RecordBatch] = (b for split in splits for b in read(ctx, split, caches))
    else:
        batches = _relayed(bounded_parallel(splits, lambda split, _: _with_notes(ctx, split, read, caches), workers,
                                            _QUEUE_BATCHES, "hudi-read"))
    for batch in batches:
        if remaining is not None:
            if batch.num_rows >= remaining:
                yield batch.slice(0, remaining)
                return
            remaining -= batch.num_rows
        yield batch


def _with_notes(
    ctx: ReadContext, split: Split, read: SplitRead, caches: ReadCaches
) -> Iterator[pa.RecordBatch | _Notes]:
    """The split's batches (on a worker thread), each after the corrupt-block notes found before it."""
    with collecting_corrupt_blocks() as notes:
        for batch in read(ctx, split, caches):
            if notes:
                yield _Notes(notes)
                notes.clear()  # handed on: the next notes belong to the next batch
            yield batch
        if notes:  # found after the split's last batch
            yield _Notes(notes)


def _relayed(items: Iterator[pa.RecordBatch | _Notes]) -> Iterator[pa.RecordBatch]:
    """The batches; the notes relayed to this (the consuming) thread."""
    for item in items:
        if isinstance(item, _Notes):
            relay_corrupt_block_notes(item.messages)
        else:
            yield item


class _Notes:
    """Corrupt-block messages a worker found, on their way to the consuming thread."""

    def __init__(self, messages: list[str]) -> None:
        self.messages = list(messages)


def _filter_batch(batch: pa.RecordBatch, expr: pc.Expression) -> pa.RecordBatch:
    table = rows_matching(pa.Table.from_batches([batch]), expr)
    return table.combine_chunks().to_batches()[0] if table.num_rows else batch.slice(0, 0)


def _select(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    if batch.schema.names == schema.names:
        return batch
    return batch.select(schema.names)  # keeps num_rows even for an empty projection (count queries)


__all__ = ["DEFAULT_WORKERS", "SplitRead", "read_split", "read_splits"]
