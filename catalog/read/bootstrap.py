"""Reading a metadata-only bootstrap skeleton: its ``_hoodie_*`` columns from the skeleton file,
the data columns from the source file it was made from, stitched by row position (see
:mod:`catalog.table.bootstrap`).

The skeleton holds one row per source row, in the source file's order; both files are read whole
(the planner never cuts a skeleton file) and the query's filter is applied to the stitched rows.
Partition columns absent from the source files (a source partitioned by folder) take their
values from the partition path, as Hudi's bootstrap reader does.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from catalog.errors import CorruptTableError, UnsupportedTableError
from catalog.format.avro import META_COLUMNS
from catalog.format.parquet import BATCH_SIZE, read_parquet
from catalog.read.context import ReadContext
from catalog.storage import Storage
from catalog.table.bootstrap import source_storage
from catalog.table.files import FileSlice


def _read_all(storage: Storage, path: str, schema: pa.Schema, constants: dict[str, pa.Scalar] | None) -> pa.Table:
    batches = list(read_parquet(storage, None, path, schema, constants=constants))
    return pa.Table.from_batches(batches, schema=schema)


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
    source_files = source_storage(ctx.storage, ctx.config)
    meta = pa.schema([f for f in schema if f.name in META_COLUMNS])
    data = pa.schema([f for f in schema if f.name not in META_COLUMNS])
    skeleton = _read_all(ctx.storage, fs.base_file_path, meta, None)
    partition_values = ctx.partition_scheme.typed_values(fs.partition)
    try:
        source = _read_all(source_files, fs.bootstrap_source, data, partition_values)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"source file {fs.bootstrap_source} of bootstrap skeleton {fs.base_file_path} is missing under "
            "hoodie.bootstrap.base.path (was the source dataset moved? point the property at its new place)"
        ) from None
    if skeleton.num_rows != source.num_rows:
        raise CorruptTableError(
            f"bootstrap skeleton {fs.base_file_path} has {skeleton.num_rows} rows, its source file "
            f"{fs.bootstrap_source} {source.num_rows}"
        )
    stitched = pa.Table.from_arrays(
        [skeleton.column(f.name) if f.name in META_COLUMNS else source.column(f.name) for f in schema], schema=schema
    )
    if filter is not None:
        stitched = stitched.filter(filter)
    return iter(stitched.combine_chunks().to_batches(max_chunksize=BATCH_SIZE))


__all__ = ["read_skeleton"]
