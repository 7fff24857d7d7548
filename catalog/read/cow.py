"""Reading a base file for a query: the copy-on-write path, and the base side of a MOR merge."""

from __future__ import annotations

from typing import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from catalog.format.parquet import read_parquet
from catalog.read.context import ReadContext
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
    mapping = ctx.column_map(fs.base_file.instant)
    return read_parquet(
        ctx.storage,
        ctx.storage.arrow_filesystem(),
        fs.base_file_path,
        schema,
        size=fs.base_file.size,
        row_groups=row_groups,
        filter=filter,
        filter_columns=filter_columns,
        constants=ctx.partition_constants(fs.partition),
        source_names=file_columns(list(schema.names), mapping) if mapping else None,
        adapt=(lambda batch: rename_nested(batch, mapping)) if mapping else None,
    )


__all__ = ["read_base"]
