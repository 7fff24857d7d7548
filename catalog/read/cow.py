"""Reading a base file for a query: the copy-on-write path, and the base side of a MOR merge.

The file's extension picks the decoder: Parquet (``catalog.format.parquet``), ORC
(``catalog.format.orc``; ``row_groups`` number its stripes) or Lance (``catalog.format.lance``,
Hudi 1.2); any other format is refused by the Parquet reader by name.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from catalog.format.lance import read_lance
from catalog.format.orc import read_orc
from catalog.format.parquet import read_parquet
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
) -> Iterator[pa.RecordBatch]:
    """Batches of the slice's base file in ``schema`` (nothing for a log-only slice)."""
    if fs.base_file is None or fs.base_file_path is None:
        return iter(())
    if is_skeleton(fs):
        return read_skeleton(ctx, fs, schema, row_groups, filter)
    mapping = ctx.column_map(fs.base_file.instant)
    constants = ctx.partition_constants(fs.partition)
    source_names = file_columns(list(schema.names), mapping) if mapping else None
    adapt = (lambda batch: rename_nested(batch, mapping)) if mapping else None
    if fs.base_file.extension == "lance":
        if row_groups is not None:  # the planner never cuts a Lance file
            raise ValueError("a Lance base file has no row groups")
        return read_lance(
            ctx.storage,
            fs.base_file_path,
            schema,
            size=fs.base_file.size,
            filter=filter,
            constants=constants,
            source_names=source_names,
            adapt=adapt,
        )
    if fs.base_file.extension == "orc":
        return read_orc(
            ctx.storage,
            fs.base_file_path,
            schema,
            stripes=row_groups,
            filter=filter,
            constants=constants,
            source_names=source_names,
            adapt=adapt,
        )
    return read_parquet(
        ctx.storage,
        ctx.storage.arrow_filesystem(),
        fs.base_file_path,
        schema,
        size=fs.base_file.size,
        row_groups=row_groups,
        filter=filter,
        filter_columns=filter_columns,
        constants=constants,
        source_names=source_names,
        adapt=adapt,
        point=ctx.point,
        footers=ctx.footers,
        nested=ctx.prunes_nested,
    )

__all__ = ["read_base"]
