"""A float column read as double the way each Hudi release reads it.

When a column's type was promoted from ``float`` to ``double`` (a later write's wider schema, or
schema on read's ``ALTER COLUMN ... TYPE double``), the files written before still hold floats.
Hudi 1.x (table version 8+) reads such a value through its text: ``0.15f`` is answered as the
double ``0.15``, the number written, not the binary widening ``0.15000000596046448``; its
compaction writes that value, so an unchanged row reads the same before and after a compaction.
Hudi 0.x (table version 6 and older) widens exactly, as a plain cast does.

The text is the float's shortest decimal form (Java's ``Float.toString`` digits), which Arrow's
float-to-string cast writes; the double is that text parsed.
"""

from __future__ import annotations

from typing import Callable, TypeVar, Union

import pyarrow as pa

#: the first table version whose Hudi release widens a float to a double through its text
FLOAT_TEXT_WIDENING_SINCE = 8

Columnar = TypeVar("Columnar", pa.RecordBatch, pa.Table)
_Column = Union[pa.Array, pa.ChunkedArray]


def widens_float_as_text(table_version: int, schema: pa.Schema) -> bool:
    """Whether the release that writes ``table_version`` reads a float as double through its text,
    and ``schema`` has a double (top level or in a struct) a float could be read as."""
    if table_version < FLOAT_TEXT_WIDENING_SINCE:
        return False
    return any(_holds(f.type, pa.types.is_float64) for f in schema)


def floats_as_text(data: Columnar, schema: pa.Schema) -> Columnar:
    """``data`` with each float value whose field in ``schema`` is a double (top-level columns and
    struct fields, by name) turned into the double of its text; every other column as it is."""
    for index, name in enumerate(data.column_names):
        at = schema.get_field_index(name)
        if at < 0:
            continue
        column = data.column(index)
        widened = _widened(column, schema.field(at).type)
        if widened is not column:
            data = data.set_column(index, pa.field(name, widened.type), widened)
    return data


def _widened(column: _Column, target: pa.DataType) -> _Column:
    if pa.types.is_float32(column.type) and pa.types.is_float64(target):
        return column.cast(pa.string()).cast(pa.float64())
    if not pa.types.is_struct(column.type) or not pa.types.is_struct(target):
        return column
    if not _holds(column.type, pa.types.is_float32):
        return column
    if isinstance(column, pa.ChunkedArray):
        return pa.chunked_array([_widened(chunk, target) for chunk in column.chunks])
    wanted = {f.name: f.type for f in target}
    fields, children = [], []
    for field, child in zip(column.type, column.flatten()):
        if field.name in wanted:
            child = _widened(child, wanted[field.name])
        fields.append(pa.field(field.name, child.type, nullable=field.nullable, metadata=field.metadata))
        children.append(child)
    return pa.StructArray.from_arrays(children, fields=fields, mask=column.is_null() if column.null_count else None)


def _holds(dtype: pa.DataType, test: Callable[[pa.DataType], bool]) -> bool:
    if test(dtype):
        return True
    return pa.types.is_struct(dtype) and any(_holds(f.type, test) for f in dtype)


__all__ = ["FLOAT_TEXT_WIDENING_SINCE", "floats_as_text", "widens_float_as_text"]
