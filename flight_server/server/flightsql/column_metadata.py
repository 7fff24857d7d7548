"""Flight SQL column metadata: the ``ARROW:FLIGHT:SQL:*`` keys on the fields of result schemas.

Generic SQL clients (the Arrow Flight SQL JDBC driver, DBeaver through it, sqlalchemy-adbc) read a
column's SQL type name, precision, scale and origin (catalog, schema, table) from these field
metadata keys; without them every type shows as NULL/unknown. Values are strings, booleans
``"1"``/``"0"`` (FlightSql.proto, "column metadata").
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

PREFIX = "ARROW:FLIGHT:SQL:"
CATALOG_NAME = PREFIX + "CATALOG_NAME"
DB_SCHEMA_NAME = PREFIX + "DB_SCHEMA_NAME"
#: the name the Arrow Java (JDBC) driver reads for the schema; the specification's is DB_SCHEMA_NAME
SCHEMA_NAME = PREFIX + "SCHEMA_NAME"
TABLE_NAME = PREFIX + "TABLE_NAME"
TYPE_NAME = PREFIX + "TYPE_NAME"
PRECISION = PREFIX + "PRECISION"
SCALE = PREFIX + "SCALE"
IS_AUTO_INCREMENT = PREFIX + "IS_AUTO_INCREMENT"
IS_CASE_SENSITIVE = PREFIX + "IS_CASE_SENSITIVE"
IS_READ_ONLY = PREFIX + "IS_READ_ONLY"
IS_SEARCHABLE = PREFIX + "IS_SEARCHABLE"

#: (SQL type name, precision) of the Arrow types with a fixed precision (digits, or characters
#: of the text form for dates and times, as JDBC's getPrecision reports them)
_FIXED: list[tuple[pa.DataType, str, int]] = [
    (pa.bool_(), "BOOLEAN", 1),
    (pa.int8(), "TINYINT", 3),
    (pa.int16(), "SMALLINT", 5),
    (pa.int32(), "INTEGER", 10),
    (pa.int64(), "BIGINT", 19),
    (pa.uint8(), "SMALLINT", 3),
    (pa.uint16(), "INTEGER", 5),
    (pa.uint32(), "BIGINT", 10),
    (pa.uint64(), "DECIMAL", 20),
    (pa.float16(), "FLOAT", 5),
    (pa.float32(), "FLOAT", 7),
    (pa.float64(), "DOUBLE", 15),
    (pa.date32(), "DATE", 10),
    (pa.date64(), "DATE", 10),
]


@dataclass(frozen=True)
class Origin:
    """Where a result column comes from: a served table (``None`` parts: not known)."""

    catalog: str | None = None
    db_schema: str | None = None
    table: str | None = None


def sql_type(dtype: pa.DataType) -> tuple[str, int | None, int | None]:
    """``(SQL type name, precision, scale)`` of an Arrow type (``None``: not applicable)."""
    for arrow_type, name, precision in _FIXED:
        if dtype == arrow_type:
            return name, precision, 0 if pa.types.is_integer(dtype) else None
    if pa.types.is_decimal(dtype):
        return "DECIMAL", dtype.precision, dtype.scale
    if pa.types.is_timestamp(dtype):
        digits = {"s": 0, "ms": 3, "us": 6, "ns": 9}[dtype.unit]
        name = "TIMESTAMP WITH TIME ZONE" if dtype.tz else "TIMESTAMP"
        return name, 19 + (digits + 1 if digits else 0), digits
    if pa.types.is_time(dtype):
        digits = {"s": 0, "ms": 3, "us": 6, "ns": 9}[dtype.unit]
        return "TIME", 8 + (digits + 1 if digits else 0), digits
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype) or pa.types.is_string_view(dtype):
        return "VARCHAR", None, None
    if pa.types.is_fixed_size_binary(dtype):
        return "BINARY", dtype.byte_width, None
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype) or pa.types.is_binary_view(dtype):
        return "VARBINARY", None, None
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or pa.types.is_fixed_size_list(dtype):
        return "ARRAY", None, None
    if pa.types.is_map(dtype):
        return "MAP", None, None
    if pa.types.is_struct(dtype):
        return "STRUCT", None, None
    if pa.types.is_duration(dtype) or pa.types.is_interval(dtype):
        return "INTERVAL", None, None
    if pa.types.is_null(dtype):
        return "NULL", None, None
    return str(dtype).upper(), None, None


def field_metadata(dtype: pa.DataType, origin: Origin) -> dict[str, str]:
    """The ``ARROW:FLIGHT:SQL:*`` keys of one column."""
    name, precision, scale = sql_type(dtype)
    textual = name == "VARCHAR"
    out = {
        TYPE_NAME: name,
        IS_AUTO_INCREMENT: "0",
        IS_CASE_SENSITIVE: "1" if textual else "0",
        IS_READ_ONLY: "1",
        IS_SEARCHABLE: "1",
    }
    if precision is not None:
        out[PRECISION] = str(precision)
    if scale is not None:
        out[SCALE] = str(scale)
    named = ((CATALOG_NAME, origin.catalog), (DB_SCHEMA_NAME, origin.db_schema), (SCHEMA_NAME, origin.db_schema),
             (TABLE_NAME, origin.table))
    for key, value in named:
        if value is not None:
            out[key] = value
    return out


def describe(schema: pa.Schema, origins: dict[str, Origin] | Origin | None = None) -> pa.Schema:
    """``schema`` with the Flight SQL metadata on every top-level field (existing keys kept).

    Args:
        origins: one :class:`Origin` for every column (a table's own schema), or by column name
            (columns not named get the type keys only).
    """
    fields = []
    for f in schema:
        origin = origins if isinstance(origins, Origin) else (origins or {}).get(f.name, Origin())
        metadata = {k.decode(): v.decode() for k, v in (f.metadata or {}).items()}
        metadata.update(field_metadata(f.type, origin))
        fields.append(f.with_metadata(metadata))
    return pa.schema(fields, metadata=schema.metadata)


__all__ = ["Origin", "describe", "field_metadata", "sql_type"]
