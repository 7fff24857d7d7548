"""Hudi 1.2 BLOB columns of Lance base files, read in descriptor mode as Hudi's Spark reader does.

Hudi writes a BLOB column (``hudi_type: BLOB`` on the Lance field) as the struct ``(type, data,
reference)`` with ``data`` in Lance's blob encoding: the bytes sit in the file and the column
holds one ``(position: u64, size: u64)`` pair per row. Hudi 1.2 reads Lance tables with
``hoodie.read.blob.inline.mode=DESCRIPTOR`` by default: no bytes are materialised; every row's
``reference`` points at the bytes inside the base file (``external_path`` the file, ``offset`` /
``length`` the pair, ``managed`` true) and ``data`` is null, whatever the file stored there
(checked against Spark's answers on tables Hudi 1.2 wrote). pylance's file reader materialises
blob bytes instead, so the pairs are read from the column's pages here.

Only the page layout Lance file format 2.0 writes for it is decoded (non-null packed pairs, one
16-byte entry per row, in row order); any other layout, a BLOB nested in another field or a
column count that does not match the schema is refused by name, never guessed.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from catalog.errors import UnsupportedTableError

HUDI_TYPE_KEY = b"hudi_type"
#: a blob's (position, size): two little-endian unsigned 64-bit integers
_PAIR_BYTES = 16


def blob_columns(physical: pa.Schema) -> list[str]:
    """Top-level BLOB columns of a Lance file's schema."""
    return [f.name for f in physical if (f.metadata or {}).get(HUDI_TYPE_KEY) == b"BLOB"]


def _column_count(dtype: pa.DataType) -> int:
    """Columns Lance file format 2.0 gives a field: one per field, depth first (a fixed-size
    list of primitives is one column)."""
    if pa.types.is_struct(dtype):
        return 1 + sum(_column_count(dtype.field(i).type) for i in range(dtype.num_fields))
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return 1 + _column_count(dtype.value_type)
    if pa.types.is_fixed_size_list(dtype) and not pa.types.is_nested(dtype.value_type):
        return 1
    if pa.types.is_nested(dtype):
        raise ValueError(f"no known column layout for {dtype}")
    return 1


def field_columns(physical: pa.Schema, n_columns: int) -> dict[str, range]:
    """The column indexes of each top-level field of a Lance 2.0 file with ``n_columns`` columns
    (``ValueError`` when the schema does not account for exactly that many)."""
    out, start = {}, 0
    for field in physical:
        count = _column_count(field.type)
        out[field.name] = range(start, start + count)
        start += count
    if start != n_columns:
        raise ValueError(f"{n_columns} columns for a schema of {start}")
    return out


def _data_column(physical: pa.Schema, name: str, n_columns: int) -> int:
    """Index of the blob ``data`` column of BLOB field ``name``."""
    blob = physical.field(name).type
    start = field_columns(physical, n_columns)[name].start + 1  # the struct's own column first
    for i in range(blob.num_fields):
        if blob.field(i).name == "data":
            return start
        start += _column_count(blob.field(i).type)
    raise ValueError("no data field")


def blob_descriptors(local: str, metadata: Any, name: str) -> pa.FixedSizeListArray:
    """The ``(position, size)`` pair of every row of BLOB column ``name`` of the Lance file at the
    local path ``local`` (``metadata``: pylance's ``LanceFileMetadata`` of it), as lists of two."""
    try:
        column = metadata.columns[_data_column(metadata.schema, name, len(metadata.columns))]
        spans = []
        for page in column.pages:
            (buffer,) = page.buffers  # one buffer: packed pairs, no validity bitmap
            if "PackedStruct" not in page.encoding or "Nullable" in page.encoding and "NoNull" not in page.encoding:
                raise ValueError("not packed non-null pairs")
            spans.append((buffer.position, buffer.size))
        if sum(size for _, size in spans) != metadata.num_rows * _PAIR_BYTES:
            raise ValueError("pairs do not cover the rows")
    except (ValueError, IndexError) as err:
        raise UnsupportedTableError(f"BLOB column {name!r}: this Lance blob layout is not supported ({err})") from err
    with open(local, "rb") as fh:
        parts = []
        for position, size in spans:
            fh.seek(position)
            parts.append(fh.read(size))
    rows = metadata.num_rows
    values = pa.Array.from_buffers(pa.uint64(), 2 * rows, [None, pa.py_buffer(b"".join(parts))])
    return pa.FixedSizeListArray.from_arrays(values, 2)


def as_descriptors(column: pa.Array, pairs: pa.FixedSizeListArray, external_path: str) -> pa.StructArray:
    """``column`` (a BLOB struct array) in descriptor mode: ``data`` null, ``reference`` the
    bytes' place in the base file ``external_path``; null rows stay null."""
    n = len(column)
    reference_type = column.type.field("reference").type
    reference = pa.StructArray.from_arrays(
        [
            pa.array([external_path] * n, reference_type.field("external_path").type),
            pc.list_element(pairs, 0).cast(reference_type.field("offset").type),
            pc.list_element(pairs, 1).cast(reference_type.field("length").type),
            pa.array([True] * n, reference_type.field("managed").type),
        ],
        fields=list(reference_type),
    )
    children = [
        column.field(i) if column.type.field(i).name == "type"
        else reference if column.type.field(i).name == "reference"
        else pa.nulls(n, column.type.field(i).type)
        for i in range(column.type.num_fields)
    ]
    return pa.StructArray.from_arrays(children, fields=list(column.type), mask=column.is_null())


__all__ = ["as_descriptors", "blob_columns", "blob_descriptors", "field_columns"]
