"""Arrow schema -> Avro schema, the way Spark/Hudi writers express the table schema.

Every field becomes a nullable union ``["null", T]`` with default null. Decimals become Avro
``fixed`` of the minimal byte width for their precision, as Spark writes them.
"""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa

META_FIELDS = (
    "_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name"
)


def decimal_fixed_size(precision: int) -> int:
    """Smallest byte count whose two's complement range holds ``precision`` decimal digits."""
    return math.ceil((math.log2(10**precision - 1) + 1) / 8)


def _avro_type(dtype: pa.DataType, name: str, namespace: str) -> Any:
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return "string"
    if pa.types.is_int64(dtype):
        return "long"
    if pa.types.is_int32(dtype) or pa.types.is_int16(dtype) or pa.types.is_int8(dtype):
        return "int"
    if pa.types.is_float64(dtype):
        return "double"
    if pa.types.is_float32(dtype):
        return "float"
    if pa.types.is_boolean(dtype):
        return "boolean"
    if pa.types.is_binary(dtype):
        return "bytes"
    if pa.types.is_date32(dtype):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(dtype):
        unit = {"ms": "millis", "us": "micros"}.get(dtype.unit)
        if unit is None:
            raise NotImplementedError(f"timestamp unit {dtype.unit} has no Avro logical type here")
        prefix = "timestamp" if dtype.tz else "local-timestamp"
        return {"type": "long", "logicalType": f"{prefix}-{unit}"}
    if pa.types.is_decimal(dtype):
        return {
            "type": "fixed",
            "name": "fixed",
            "namespace": f"{namespace}.{name}",
            "size": decimal_fixed_size(dtype.precision),
            "logicalType": "decimal",
            "precision": dtype.precision,
            "scale": dtype.scale,
        }
    if pa.types.is_struct(dtype):
        return {
            "type": "record",
            "name": name,
            "namespace": namespace,
            "fields": [_avro_field(f, f"{namespace}.{name}") for f in dtype],
        }
    raise NotImplementedError(f"no Avro mapping for Arrow type {dtype}")


def _avro_field(field: pa.Field, namespace: str) -> dict:
    return {"name": field.name, "type": ["null", _avro_type(field.type, field.name, namespace)], "default": None}


def arrow_to_avro(schema: pa.Schema, record_name: str, namespace: str, with_meta_fields: bool = False) -> dict:
    """Avro record schema for ``schema``; ``with_meta_fields`` prepends the five Hudi meta columns."""
    fields = (
        [{"name": m, "type": ["null", "string"], "doc": "", "default": None} for m in META_FIELDS]
        if with_meta_fields else []
    )
    fields += [_avro_field(f, namespace) for f in schema if f.name not in META_FIELDS]
    return {"type": "record", "name": record_name, "namespace": namespace, "fields": fields}
