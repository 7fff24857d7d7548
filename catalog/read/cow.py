"""Reading a base file for a query: the copy-on-write path, and the base side of a MOR merge.

The file's extension picks the decoder: Parquet (``catalog.format.parquet``), ORC
(``catalog.format.orc``; ``row_groups`` number its stripes) or Lance (``catalog.format.lance``,
Hudi 1.2); any other format is refused by the Parquet reader by name. Each is given one
:class:`~catalog.format.base_file.BaseFileRead`, the file's part of the read task.
"""

from __future__ import annotations

import functools
from typing import Callable, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from catalog.format.base_file import BaseFileRead
from catalog.format.caches import NO_CACHES, ReadCaches
from catalog.format.float_text import floats_as_text, widens_float_as_text
from catalog.format.lance import read_lance
from catalog.format.orc import read_orc
from catalog.format.parquet import read_parquet
from catalog.format.parquet_cached import read_cached, reads_through_cache
from catalog.read.bootstrap import read_skeleton
from catalog.read.context import ReadContext
from catalog.table.bootstrap import is_skeleton
from catalog.table.files import FileSlice
from catalog.table.internal_schema import file_columns, rename_nested


def read_base(
    ctx: ReadContext,
    fs: FileSlice,
    schema: pa.Schema,
    row_groups: Sequence[int] | None = None,
    filter: pc.Expression | None = None,
    filter_columns: Sequence[str] = (),
    caches: ReadCaches = NO_CACHES,
) -> Iterator[pa.RecordBatch]:
    """Batches of the slice's base file in ``schema`` (nothing for a log-only slice), read
    through ``caches``: a Parquet point or filter read through its decoded row groups when
    ``caches`` keeps them (:mod:`catalog.format.parquet_cached`)."""
    if fs.base_file is None or fs.base_file_path is None:
        return iter(())
    if is_skeleton(fs):
        return read_skeleton(ctx, fs, schema, row_groups, filter)
    mapping = ctx.column_map(fs.base_file.instant)
    steps = [functools.partial(rename_nested, mapping=mapping)] if mapping else []
    if widens_float_as_text(ctx.config.table_version, schema):
        steps.append(functools.partial(floats_as_text, schema=schema))
    file = BaseFileRead(
        fs.base_file_path,
        schema,
        size=fs.base_file.size,
        row_groups=tuple(row_groups) if row_groups is not None else None,
        filter=filter,
        filter_columns=tuple(filter_columns),
        constants=ctx.partition_constants(fs.partition),
        source_names=file_columns(list(schema.names), mapping) if mapping else None,
        adapt=functools.partial(_adapted, steps=tuple(steps)) if steps else None,
        point=ctx.point,
        nested=ctx.prunes_nested,
    )
    if fs.base_file.extension == "lance":
        return read_lance(ctx.storage, file)
    if fs.base_file.extension == "orc":
        return read_orc(ctx.storage, file)
    if caches.row_groups is not None and reads_through_cache(file):
        return read_cached(ctx.storage, file, caches)
    return read_parquet(ctx.storage, file, caches)


def _adapted(batch: pa.RecordBatch, steps: tuple[Callable[[pa.RecordBatch], pa.RecordBatch], ...]) -> pa.RecordBatch:
    """``batch`` through each of ``steps`` in turn: schema on read's nested renames, then the
    widening of floats the table's Hudi release reads through their text."""
    for step in steps:
        batch = step(batch)
    return batch


__all__ = ["read_base"]
