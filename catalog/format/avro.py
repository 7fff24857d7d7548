"""Avro schemas and records -> Arrow (format doc section 9.1).

Timestamps carry ``tz="UTC"`` like Spark's Parquet files and maps become Arrow maps; both are
places where the ``hudi`` package departs from Hudi/Spark (format doc 9.1, section 11).
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

import pyarrow as pa

from catalog.errors import CorruptTableError
from catalog.format.hudi_types import (
    check_blob,
    check_variant,
    is_vector,
    vector_bytes_type,
    vector_from_bytes,
    vector_type,
)

META_COLUMNS = (
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
)
OPERATION_COLUMN = "_hoodie_operation"

_PRIMITIVES: dict[str, pa.DataType] = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}
_TIME_UNITS = {"millis": "ms", "micros": "us", "nanos": "ns"}


class _Converter:
    """Walks one Avro schema, remembering named types so later references resolve."""

    def __init__(self) -> None:
        self.named: dict[str, tuple[pa.DataType, bool]] = {}

    def field_of(self, name: str, schema: Any) -> pa.Field:
        dtype, nullable = self.convert(schema)
        return pa.field(name, dtype, nullable=nullable)

    def convert(self, schema: Any, namespace: str = "") -> tuple[pa.DataType, bool]:
        """Return (arrow type, nullable) for an Avro schema node."""
        if isinstance(schema, list):
            return self._union(schema, namespace)
        if isinstance(schema, str):
            if schema in _PRIMITIVES:
                return _PRIMITIVES[schema], schema == "null"
            for key in (schema, f"{namespace}.{schema}" if namespace else schema):
                if key in self.named:
                    return self.named[key]
            short = schema.rsplit(".", 1)[-1]
            for key, value in self.named.items():
                if key.rsplit(".", 1)[-1] == short:
                    return value
            raise CorruptTableError(f"Avro schema references unknown type {schema!r}")
        if not isinstance(schema, Mapping) or "type" not in schema:
            raise CorruptTableError(f"not an Avro schema node: {schema!r}")
        logical = schema.get("logicalType")
        kind = schema["type"]
        if isinstance(kind, (list, Mapping)):
            return self.convert(kind, namespace)
        if logical:
            converted = self._logical(schema, kind, logical)
            if converted is not None:
                if kind == "fixed":
                    self._register(schema, namespace, converted)
                return converted, False
        if kind == "record" or kind == "error":
            ns = schema.get("namespace", namespace)
            # Register a placeholder first is unnecessary for non-recursive Spark schemas.
            fields = [self.field_of(f["name"], f["type"]) for f in schema.get("fields", [])]
            dtype = pa.struct(fields)
            self._register(schema, ns, dtype)
            return dtype, False
        if kind == "enum":
            self._register(schema, namespace, pa.string())
            return pa.string(), False
        if kind == "fixed":
            dtype = pa.binary(int(schema["size"]))
            self._register(schema, namespace, dtype)
            return dtype, False
        if kind == "array":
            item, item_nullable = self.convert(schema["items"], namespace)
            return pa.list_(pa.field("element", item, nullable=item_nullable)), False
        if kind == "map":
            value, value_nullable = self.convert(schema["values"], namespace)
            return pa.map_(pa.string(), pa.field("value", value, nullable=value_nullable)), False
        if kind in _PRIMITIVES:
            return _PRIMITIVES[kind], kind == "null"
        return self.convert(kind, namespace)

    def _register(self, schema: Mapping[str, Any], namespace: str, dtype: pa.DataType) -> None:
        name = schema.get("name")
        if not name:
            return
        ns = schema.get("namespace", namespace)
        full = name if "." in name or not ns else f"{ns}.{name}"
        self.named[full] = (dtype, False)
        self.named.setdefault(name, (dtype, False))

    def _union(self, branches: list[Any], namespace: str) -> tuple[pa.DataType, bool]:
        non_null = [b for b in branches if b != "null"]
        nullable = len(non_null) < len(branches)
        if len(non_null) == 1:
            dtype, _ = self.convert(non_null[0], namespace)
            return dtype, nullable
        if not non_null:
            return pa.null(), True
        children = [self.field_of(f"u{i}", b) for i, b in enumerate(non_null)]
        return pa.dense_union(children), nullable

    @staticmethod
    def _logical(schema: Mapping[str, Any], kind: str, logical: str) -> pa.DataType | None:
        if logical == "vector" and kind == "fixed":
            return vector_type(schema)
        if logical == "variant" and kind == "record":
            check_variant(schema)  # then converted as the record it is
        if logical == "blob" and kind == "record":
            check_blob(schema)
        if logical == "decimal" and kind in ("bytes", "fixed"):
            precision = int(schema["precision"])
            scale = int(schema.get("scale", 0))
            return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
        if logical == "date" and kind == "int":
            return pa.date32()
        if logical == "time-millis" and kind == "int":
            return pa.time32("ms")
        if logical == "time-micros" and kind == "long":
            return pa.time64("us")
        if kind == "long" and logical.startswith("timestamp-"):
            unit = _TIME_UNITS.get(logical.split("-", 1)[1])
            return pa.timestamp(unit, tz="UTC") if unit else None
        if kind == "long" and logical.startswith("local-timestamp-"):
            unit = _TIME_UNITS.get(logical.rsplit("-", 1)[1])
            return pa.timestamp(unit) if unit else None
        return None  # uuid and unknown logical types keep their physical type


def parse_avro_schema(text: str | Mapping[str, Any]) -> Mapping[str, Any]:
    """Parse Avro schema JSON text; raise CorruptTableError naming the problem."""
    if isinstance(text, Mapping):
        return text
    try:
        value = json.loads(text)
    except (TypeError, ValueError) as err:
        raise CorruptTableError(f"invalid Avro schema JSON: {err}") from err
    if not isinstance(value, Mapping) or value.get("type") != "record":
        raise CorruptTableError("an Avro table schema must be a record")
    return value


def avro_to_arrow_schema(schema: str | Mapping[str, Any]) -> pa.Schema:
    """The Arrow schema of an Avro record schema (top-level fields become columns)."""
    record = parse_avro_schema(schema)
    dtype, _ = _Converter().convert(record)
    return pa.schema(list(dtype))


def with_meta_columns(schema: pa.Schema) -> pa.Schema:
    """Put the five Hudi meta columns (nullable strings) first, whatever the input holds."""
    existing = {name: schema.field(name) for name in schema.names}
    meta = [pa.field(name, pa.string()) for name in META_COLUMNS]
    if OPERATION_COLUMN in existing:
        meta.append(pa.field(OPERATION_COLUMN, pa.string()))
    reserved = {f.name for f in meta}
    rest = [schema.field(i) for i in range(len(schema)) if schema.names[i] not in reserved]
    return pa.schema(meta + rest, metadata=schema.metadata)


def without_meta_columns(schema: pa.Schema) -> pa.Schema:
    """``schema`` minus any Hudi meta column."""
    meta = set(META_COLUMNS) | {OPERATION_COLUMN}
    return pa.schema([f for f in schema if f.name not in meta], metadata=schema.metadata)


def records_to_arrow(records: Iterable[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    """fastavro-decoded records -> an Arrow table of ``schema`` (missing fields become null).

    fastavro already turns logical types into Python values (Decimal, date, aware datetime),
    which pyarrow converts directly; maps arrive as dicts and become key/value pairs here.
    """
    rows = list(records)
    map_paths = [name for name in schema.names if pa.types.is_map(schema.field(name).type)]
    if map_paths:
        for row in rows:
            for name in map_paths:
                value = row.get(name)
                if isinstance(value, Mapping):
                    row[name] = list(value.items())  # type: ignore[index]
    # VECTOR values arrive as their fixed bytes: decoded as such, then turned into elements.
    vectors = [i for i, f in enumerate(schema) if is_vector(f.type)]
    physical = schema
    for i in vectors:
        physical = physical.set(i, schema.field(i).with_type(vector_bytes_type(schema.field(i).type)))
    try:
        table = pa.Table.from_pylist(rows, schema=physical)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as err:
        raise CorruptTableError(f"Avro records do not match schema: {err}") from err
    for i in vectors:
        column = vector_from_bytes(table.column(i).combine_chunks(), schema.field(i).type)
        table = table.set_column(i, schema.field(i), column)
    return table


__all__ = [
    "META_COLUMNS",
    "OPERATION_COLUMN",
    "avro_to_arrow_schema",
    "parse_avro_schema",
    "records_to_arrow",
    "with_meta_columns",
    "without_meta_columns",
]
