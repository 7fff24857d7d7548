"""Partition paths -> typed partition values (format doc section 8).

A path has one segment per partition field (``field=value`` when hive-style); with URL encoding
each segment is decoded on its own after splitting on ``/`` so that ``%2F`` inside a value
survives. Timestamp key generators write formatted dates that cannot be turned back into the
source column, so those fields get no typed value (``catalog.plan.prune`` translates some
filters on them into path filters instead).
"""

from __future__ import annotations

from typing import Sequence
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc

from catalog.table.config import TableConfig

PARTITION_PATH_COLUMN = "_hoodie_partition_path"
NULL_PARTITION_VALUES = frozenset({"__HIVE_DEFAULT_PARTITION__", "default"})


def _prunable_type(dtype: pa.DataType) -> bool:
    # Timestamps are excluded: the path spells them in a writer-chosen format.
    return (
        pa.types.is_integer(dtype)
        or pa.types.is_floating(dtype)
        or pa.types.is_decimal(dtype)
        or pa.types.is_string(dtype)
        or pa.types.is_large_string(dtype)
        or pa.types.is_boolean(dtype)
        or pa.types.is_date(dtype)
    )


def timestamp_fields(config: TableConfig) -> set[str]:
    """Fields written through a timestamp key generator (whole TIMESTAMP keygen or CUSTOM ``f:TIMESTAMP``)."""
    if config.is_timestamp_keygen:
        return set(config.partition_fields)
    raw = config.properties.get("hoodie.table.partition.fields") or ""
    out = set()
    for entry in raw.split(","):
        name, _, kind = entry.strip().partition(":")
        if kind.strip().upper() == "TIMESTAMP":
            out.add(name)
    return out


def dropped_partition_columns(config: TableConfig) -> frozenset[str]:
    """The partition columns the table leaves out of its data files: their values are the partition
    path's, so file statistics (the MDT's column and partition stats) say nothing about them."""
    return frozenset(config.partition_fields) if config.drop_partition_columns else frozenset()


def with_dropped_partition_columns(schema: pa.Schema, config: TableConfig) -> pa.Schema:
    """The table schema of a table whose data files leave the partition columns out
    (``hoodie.datasource.write.drop.partition.columns``): the writer's schema (in the commit
    metadata and the files) lacks them, and Hudi's readers append each one missing as a nullable
    string (Java's ``TableSchemaResolver`` appends them after the data columns), whose values come
    from the partition path (:meth:`PartitionScheme.typed_values`)."""
    if not config.drop_partition_columns:
        return schema
    missing = [pa.field(name, pa.string()) for name in config.partition_fields if schema.get_field_index(name) < 0]
    return pa.schema([*schema, *missing], metadata=schema.metadata) if missing else schema


#: the first table version Hudi 1.x writes: its Spark reader types a timestamp key generator's
#: partition fields as text
TIMESTAMP_PARTITION_TEXT_SINCE = 8


def with_timestamp_partition_text(schema: pa.Schema, config: TableConfig) -> pa.Schema:
    """The table schema as Hudi 1.x's Spark reader answers a table partitioned by the timestamp
    key generator: each partition field a nullable string holding the field's value as text
    (``'1705311000'`` for the long ``1705311000``, not the formatted folder), whatever type the
    writer's schema gives it (the file index's partition schema types it ``StringType``), in the
    snapshot, at every instant and in every query. Hudi 0.x (table version 6 and older) answers
    the writer's type, and so do we there."""
    if config.table_version < TIMESTAMP_PARTITION_TEXT_SINCE or not config.is_timestamp_keygen:
        return schema
    fields = [
        pa.field(f.name, pa.string(), metadata=f.metadata) if f.name in config.partition_fields else f
        for f in schema
    ]
    return pa.schema(fields, metadata=schema.metadata)


class PartitionScheme:
    """How a table's partition paths map to its partition columns."""

    def __init__(self, config: TableConfig, schema: pa.Schema):
        self.fields = list(config.partition_fields)
        self.hive_style = config.hive_style_partitioning
        self.url_encoded = config.url_encoded_partitioning
        opaque = timestamp_fields(config)
        self.value_fields: list[pa.Field] = [
            schema.field(name)
            for name in self.fields
            if name not in opaque and schema.get_field_index(name) >= 0 and _prunable_type(schema.field(name).type)
        ]

    def parse(self, path: str) -> dict[str, str | None] | None:
        """Raw string value per partition field, or ``None`` if the path does not have that shape."""
        if not self.fields:
            return {}
        segments = path.split("/") if path else []
        if len(segments) != len(self.fields):
            return None
        out: dict[str, str | None] = {}
        for name, segment in zip(self.fields, segments):
            if self.hive_style:
                key, eq, value = segment.partition("=")
                if not eq or key != name:
                    return None
            else:
                value = segment
            if self.url_encoded:
                value = unquote(value)
            out[name] = None if value in NULL_PARTITION_VALUES else value
        return out

    def values_table(self, partitions: Sequence[str]) -> pa.Table:
        """One row per partition: ``_hoodie_partition_path`` plus every field that can be typed."""
        columns: dict[str, pa.Array] = {PARTITION_PATH_COLUMN: pa.array(list(partitions), pa.string())}
        parsed = [self.parse(p) for p in partitions]
        if any(p is None for p in parsed):
            return pa.table(columns)
        for field in self.value_fields:
            raw = pa.array([p[field.name] for p in parsed], pa.string())  # type: ignore[index]
            try:
                columns[field.name] = pc.cast(raw, field.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                continue  # a value that does not parse: never prune on this field
        return pa.table(columns)

    def typed_values(self, path: str) -> dict[str, pa.Scalar]:
        """Typed values of ``path`` for the fields that can be typed (to rebuild dropped columns)."""
        table = self.values_table([path])
        return {name: table.column(name)[0] for name in table.column_names if name != PARTITION_PATH_COLUMN}


__all__ = [
    "PARTITION_PATH_COLUMN",
    "PartitionScheme",
    "dropped_partition_columns",
    "timestamp_fields",
    "with_dropped_partition_columns",
    "with_timestamp_partition_text",
]
