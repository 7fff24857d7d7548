"""Reading splits: the exact rows of one split for a query, and of many splits in parallel.

:func:`read_split` is the one per-split reader: the library, a Flight ``do_get`` and any other
process holding a :class:`ReadContext` and a :class:`Split` run it. It merges log files
(merge-on-read), applies the row filter (query filters and the incremental commit-time filter),
projects and casts to the output schema.
"""

from __future__ import annotations

import os
import queue
import threading
from typing import Any, Callable, Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from catalog.format.log_file import collecting_corrupt_blocks, relay_corrupt_block_notes
from catalog.format.parquet import conform_batch
from catalog.read.cdc import read_cdc_split
from catalog.read.context import ReadContext
from catalog.read.cow import read_base
from catalog.read.mor import merge_file_slice
from catalog.table.files import Split

#: IO-bound: a few threads per core
DEFAULT_WORKERS = max(2, min(8, (os.cpu_count() or 2) * 2))
_QUEUE_BATCHES = 16
_DONE = object()


def read_split(ctx: ReadContext, split: Split) -> Iterator[pa.RecordBatch]:
    """The exact rows of ``split`` for the query of ``ctx``, as batches of ``ctx.output_schema``."""
    if ctx.cdc is not None:
        yield from read_cdc_split(ctx, split, read_split)
        return
    fs = split.file_slice
    row_groups = split.row_groups
    out_schema = ctx.output_schema
    if fs.has_logs and not ctx.read_optimized:
        for batch in merge_file_slice(ctx, fs, row_groups):
            batch = conform_batch(batch, ctx.read_schema)
            if ctx.row_filter is not None:
                batch = _filter_batch(batch, ctx.row_filter)
            if batch.num_rows:
                yield _select(batch, out_schema)
        return
    for batch in read_base(ctx, fs, ctx.read_schema, row_groups, ctx.row_filter, ctx.filter_columns):
        yield _select(batch, out_schema)


def read_splits(
    ctx: ReadContext, splits: Iterable[Split], limit: int | None = None, workers: int = DEFAULT_WORKERS
) -> Iterator[pa.RecordBatch]:
    """Every split's rows, read by ``workers`` threads, batches yielded as they come (any order).

    ``splits`` may be a lazy iterator (planning streams): workers take the next split as they
    free up. Memory stays bounded: at most ``_QUEUE_BATCHES`` finished batches wait, plus one
    batch in the hands of each worker. At most ``limit`` rows are returned.

    Log blocks the workers skip as corrupt are relayed to this (the consuming) thread's
    :func:`~catalog.format.log_file.collecting_corrupt_blocks` before the batch that follows
    them, so a Flight stream reports them as it does for a single split.
    """
    if limit == 0:
        return
    remaining = limit
    for batch in _parallel(iter(splits), lambda split: read_split(ctx, split), workers):
        if remaining is not None:
            if batch.num_rows >= remaining:
                yield batch.slice(0, remaining)
                return
            remaining -= batch.num_rows
        yield batch


def _parallel(
    items: Iterator[Any], read: Callable[[Any], Iterable[pa.RecordBatch]], workers: int
) -> Iterator[pa.RecordBatch]:
    """``read(item)`` for every item on ``workers`` threads, batches yielded as they come.

    Errors in a worker are re-raised here; closing the generator early stops the workers.
    Corrupt-block notes collected by a worker are relayed to this thread (see :func:`read_splits`).
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
                with collecting_corrupt_blocks() as notes:
                    for batch in read(item):
                        if notes and not put(_Notes(notes)):
                            return
                        notes.clear()  # queued: the next notes belong to the next batch
                        if not put(batch):
                            return
                    if notes and not put(_Notes(notes)):  # found after the split's last batch
                        return
        except BaseException as err:  # noqa: BLE001 - handed to the consumer thread
            put(err)
        finally:
            put(_DONE)

    threads = [threading.Thread(target=work, name=f"hudi-read-{i}", daemon=True) for i in range(workers)]
    for t in threads:
        t.start()
    finished = 0
    try:
        while finished < workers:
            item = out.get()
            if item is _DONE:
                finished += 1
            elif isinstance(item, _Notes):
                relay_corrupt_block_notes(item.messages)
            elif isinstance(item, BaseException):
                raise item
            else:
                yield item
    finally:
        stop.set()
        for t in threads:
            t.join()


class _Notes:
    """Corrupt-block messages a worker found, on their way to the consuming thread."""

    def __init__(self, messages: list[str]) -> None:
        self.messages = list(messages)


def _filter_batch(batch: pa.RecordBatch, expr: pc.Expression) -> pa.RecordBatch:
    table = pa.Table.from_batches([batch]).filter(expr)
    return table.combine_chunks().to_batches()[0] if table.num_rows else batch.slice(0, 0)


def _select(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    if batch.schema.names == schema.names:
        return batch
    return batch.select(schema.names)  # keeps num_rows even for an empty projection (count queries)


__all__ = ["DEFAULT_WORKERS", "read_split", "read_splits"]
