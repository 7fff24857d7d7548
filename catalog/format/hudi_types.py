"""Hudi 1.2's AI/ML column types (RFC-99/RFC-100) -> Arrow.

Hudi 1.2 records them in the table's Avro schema as logical types with properties:

* VECTOR: ``{"type": "fixed", "logicalType": "vector", "dimension": d, "elementType":
  "FLOAT"|"DOUBLE"|"INT8", "storageBacking": "FIXED_BYTES", "size": d * element bytes}``; the
  bytes are the elements in little-endian order. Arrow: ``pa.list_(element type, d)`` (a
  fixed-size list). Hudi allows vectors only as top-level columns.
* VARIANT: ``{"type": "record", "logicalType": "variant", "fields": [metadata: bytes, value:
  bytes]}``. Arrow: ``struct<metadata: binary, value: binary>``. A *shredded* variant (a
  ``typed_value`` field) is refused by name.
* BLOB: ``{"type": "record", "logicalType": "blob", "fields": [type: enum INLINE|OUT_OF_LINE,
  data: bytes, reference: record(external_path, offset, length, managed)]}``. Arrow: the
  struct itself (the descriptor: storage mode, inline bytes, external reference); the bytes of
  an out-of-line blob are never fetched.

Any other form (another storage backing or element type, an unexpected field layout) is refused
with :class:`~catalog.errors.UnsupportedTableError` naming it, never read as something else.
"""

from __future__ import annotations

import sys
from typing import Any, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from catalog.errors import CorruptTableError, UnsupportedTableError

#: VECTOR ``elementType`` -> Arrow type (Hudi stores the elements little-endian)
VECTOR_ELEMENTS: dict[str, pa.DataType] = {"FLOAT": pa.float32(), "DOUBLE": pa.float64(), "INT8": pa.int8()}
VARIANT_FIELDS = ("metadata", "value")
BLOB_FIELDS = ("type", "data", "reference")
BLOB_REFERENCE_FIELDS = ("external_path", "offset", "length", "managed")


def vector_type(schema: Mapping[str, Any]) -> pa.DataType:
    """The Arrow type of a VECTOR's Avro ``fixed`` node."""
    name = schema.get("name", "vector")
    backing = schema.get("storageBacking", "FIXED_BYTES")
    if backing != "FIXED_BYTES":
        raise UnsupportedTableError(f"VECTOR {name}: storage backing {backing!r} is not supported")
    element = str(schema.get("elementType", "FLOAT")).upper()
    if element not in VECTOR_ELEMENTS:
        raise UnsupportedTableError(f"VECTOR {name}: element type {element!r} is not supported")
    try:
        dimension = int(schema["dimension"])
        size = int(schema["size"])
    except (KeyError, TypeError, ValueError) as err:
        raise CorruptTableError(f"VECTOR {name}: bad dimension or size in the schema: {err}") from err
    arrow_type = VECTOR_ELEMENTS[element]
    if dimension <= 0 or size != dimension * arrow_type.byte_width:
        raise CorruptTableError(f"VECTOR {name}: {size} bytes do not hold {dimension} {element} elements")
    return pa.list_(arrow_type, dimension)


def check_variant(schema: Mapping[str, Any]) -> None:
    """A VARIANT record must be the unshredded (metadata, value) pair."""
    names = tuple(f.get("name") for f in schema.get("fields", []))
    if "typed_value" in names:
        raise UnsupportedTableError(f"shredded VARIANT column {schema.get('name', '')!r} is not supported")
    if names != VARIANT_FIELDS:
        raise UnsupportedTableError(f"VARIANT with fields {list(names)} is not supported")


def check_blob(schema: Mapping[str, Any]) -> None:
    """A BLOB record must have Hudi 1.2's descriptor layout."""
    names = tuple(f.get("name") for f in schema.get("fields", []))
    if names != BLOB_FIELDS:
        raise UnsupportedTableError(f"BLOB with fields {list(names)} is not supported")


def is_vector(dtype: pa.DataType) -> bool:
    return pa.types.is_fixed_size_list(dtype) and any(dtype.value_type.equals(t) for t in VECTOR_ELEMENTS.values())


def vector_bytes_type(dtype: pa.FixedSizeListType) -> pa.DataType:
    """The physical type of a VECTOR in Parquet and Avro files: its fixed bytes."""
    return pa.binary(dtype.list_size * dtype.value_type.byte_width)


def vector_from_bytes(arr: pa.Array, target: pa.FixedSizeListType) -> pa.Array:
    """A VECTOR column stored as fixed (or variable) bytes -> the fixed-size list ``target``.

    Every non-null value must hold exactly ``dimension`` little-endian elements.
    """
    if sys.byteorder != "little":  # the elements are reinterpreted in place
        raise UnsupportedTableError("VECTOR columns are read on little-endian machines only")
    width = target.list_size * target.value_type.byte_width
    valid = arr.is_valid()
    filled = arr.fill_null(b"\0" * width) if arr.null_count else arr
    if pa.types.is_fixed_size_binary(filled.type):
        if filled.type.byte_width != width:
            raise CorruptTableError(f"a VECTOR value of {filled.type.byte_width} bytes is not {width} bytes")
        data = filled.buffers()[1].slice(filled.offset * width, len(filled) * width)
    else:
        values = filled.to_pylist()
        if any(len(v) != width for v in values):
            raise CorruptTableError(f"a VECTOR value is not {width} bytes")
        data = pa.py_buffer(b"".join(values))
    elements = pa.Array.from_buffers(target.value_type, len(filled) * target.list_size, [None, data])
    mask = pc.invert(valid) if arr.null_count else None
    return pa.FixedSizeListArray.from_arrays(elements, type=target, mask=mask)


__all__ = [
    "BLOB_FIELDS",
    "VARIANT_FIELDS",
    "VECTOR_ELEMENTS",
    "check_blob",
    "check_variant",
    "is_vector",
    "vector_bytes_type",
    "vector_from_bytes",
    "vector_type",
]
