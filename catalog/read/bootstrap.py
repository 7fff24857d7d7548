"""Reading a metadata-only bootstrap skeleton: its ``_hoodie_*`` columns from the skeleton file,
the data columns from the source file it was made from, stitched by row position (see
:mod:`catalog.table.bootstrap`).

The skeleton holds one row per source row, in the source file's order. Both files are streamed
side by side (the planner never cuts a skeleton file), cut into batches of equal length, and the
query's filter is applied to the stitched rows. The skeleton is read even when no ``_hoodie_*``
column is asked for (its footer gives the row counts), so a source file with other rows than its
skeleton is refused rather than misaligned. Partition columns absent from the source files (a
source partitioned by ``col=value`` folders) take their values from the partition path, as Hudi's
bootstrap reader does.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from catalog.errors import CorruptTableError, UnsupportedTableError
from catalog.format.avro import META_COLUMNS
from catalog.format.base_file import BaseFileRead
from catalog.format.parquet import conform_batches, read_parquet
from catalog.read.context import ReadContext
from catalog.table.bootstrap import source_storage
from catalog.table.files import FileSlice


def read_skeleton(
    ctx: ReadContext,
    fs: FileSlice,
    schema: pa.Schema,
    row_groups: Sequence[int] | None = None,
    filter: pc.Expression | None = None,
) -> Iterator[pa.RecordBatch]:
    """Batches of ``schema`` of the skeleton slice ``fs``, the rows matching ``filter``.

    Raises:
        UnsupportedTableError: the planner found no source file for the skeleton (no
            ``hoodie.bootstrap.base.path``): never the skeleton's rows without their data.
    """
    if fs.bootstrap_source is None or fs.base_file_path is None:
        raise UnsupportedTableError(
            f"bootstrap skeleton file {fs.base_file_path} without its source file: metadata-only bootstrapped "
            "tables are read through their bootstrap index and hoodie.bootstrap.base.path"
        )
    if row_groups is not None:
        raise ValueError(f"bootstrap skeleton {fs.base_file_path} is read whole, not by row group")
    meta = pa.schema([f for f in schema if f.name in META_COLUMNS])
    data = pa.schema([f for f in schema if f.name not in META_COLUMNS])
    skeleton = read_parquet(ctx.storage, BaseFileRead(fs.base_file_path, meta), native=False)
    stitched: Iterator[pa.RecordBatch] = skeleton  # no data column asked for: the skeleton is all
    if len(data):
        source_file = BaseFileRead(fs.bootstrap_source, data, constants=ctx.partition_scheme.typed_values(fs.partition))
        source = read_parquet(source_storage(ctx.storage, ctx.config), source_file, native=False)
        stitched = (
            pa.RecordBatch.from_arrays(
                [left.column(f.name) if f.name in META_COLUMNS else right.column(f.name) for f in schema], schema=schema
            )
            for left, right in _aligned(skeleton, _missing_named(source, fs), fs)
        )
    yield from conform_batches(stitched, schema, filter=filter)


def _missing_named(batches: Iterator[pa.RecordBatch], fs: FileSlice) -> Iterator[pa.RecordBatch]:
    """The source file's batches; its absence said in terms of what to fix."""
    try:
        yield from batches
    except FileNotFoundError:
        raise FileNotFoundError(
            f"source file {fs.bootstrap_source} of bootstrap skeleton {fs.base_file_path} is missing under "
            "hoodie.bootstrap.base.path (was the source dataset moved? point the property at its new place)"
        ) from None


def _aligned(
    left: Iterator[pa.RecordBatch], right: Iterator[pa.RecordBatch], fs: FileSlice
) -> Iterator[tuple[pa.RecordBatch, pa.RecordBatch]]:
    """Pairs of equally long batches cut from the skeleton's and the source file's streams.

    Raises:
        CorruptTableError: the two files do not hold the same number of rows.
    """
    pending: pa.RecordBatch | None = None
    for batch in left:
        offset = 0
        while offset < batch.num_rows:
            if pending is None or pending.num_rows == 0:
                pending = next(right, None)
                if pending is None:
                    raise _unequal(fs, "more")
                continue
            n = min(batch.num_rows - offset, pending.num_rows)
            yield batch.slice(offset, n), pending.slice(0, n)
            offset += n
            pending = pending.slice(n)
    if (pending is not None and pending.num_rows) or any(b.num_rows for b in right):
        raise _unequal(fs, "fewer")


def _unequal(fs: FileSlice, skeleton_has: str) -> CorruptTableError:
    return CorruptTableError(
        f"bootstrap skeleton {fs.base_file_path} has {skeleton_has} rows than its source file {fs.bootstrap_source}"
    )


__all__ = ["read_skeleton"]
