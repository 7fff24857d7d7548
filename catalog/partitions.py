"""Partition paths -> partition values, and partition pruning (format doc section 8).

A path has one segment per partition field (``field=value`` when hive-style); with URL encoding
each segment is decoded on its own after splitting on ``/`` so that ``%2F`` inside a value
survives. Timestamp key generators write formatted dates that cannot be turned back into the
source column; ``_hoodie_partition_path`` can always be pruned on, and filters on an epoch-number
source column become path filters when that is safe (:class:`TimestampPathFilters`).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Sequence
from urllib.parse import unquote
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pyarrow as pa
import pyarrow.compute as pc

from .config import TableConfig
from .filters import BoundFilter, filter_table

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


def _timestamp_fields(config: TableConfig) -> set[str]:
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


_EPOCH_UNITS = {"EPOCHMILLISECONDS": 1_000, "UNIX_TIMESTAMP": 1, "EPOCHMICROSECONDS": 1_000_000}
_DATE_TOKENS = {"yyyy": "%Y", "MM": "%m", "dd": "%d", "HH": "%H", "mm": "%M", "ss": "%S"}
_TOKEN_ORDER = list(_DATE_TOKENS)


def _monotonic_strftime(java_format: str) -> str | None:
    """A strftime pattern for a Java date format whose output sorts like time itself.

    Only fixed-width numeric fields from years down, in order, separated by non-letter,
    non-digit literals qualify (``yyyy/MM/dd/HH``, ``yyyy-MM-dd``); anything else returns None.
    """
    out, rank, i = [], -1, 0
    while i < len(java_format):
        token = next((t for t in _TOKEN_ORDER if java_format.startswith(t, i)), None)
        if token is not None:
            if _TOKEN_ORDER.index(token) != rank + 1:
                return None
            rank += 1
            out.append(_DATE_TOKENS[token])
            i += len(token)
        elif java_format[i].isalnum() or java_format[i] in "'%":
            return None
        else:
            out.append(java_format[i])
            i += 1
    return "".join(out) if rank >= 0 else None


class TimestampPathFilters:
    """Turns filters on a timestamp-keygen source column into ``_hoodie_partition_path`` filters.

    Only when that is safe: an epoch-number source type (the value maps to one instant), an output
    format that sorts like time, and a known output time zone. Otherwise nothing is translated.
    """

    def __init__(self, config: TableConfig, schema: pa.Schema):
        opts = config.timestamp_keygen_options()
        self.field: str | None = None
        fields = config.partition_fields
        unit = _EPOCH_UNITS.get((opts.get("timestamp.type") or "").upper())
        pattern = _monotonic_strftime(opts.get("output.dateformat") or "")
        zone_name = opts.get("output.timezone") or opts.get("timezone") or "UTC"
        if not config.is_timestamp_keygen or len(fields) != 1 or unit is None or pattern is None:
            return
        if schema.get_field_index(fields[0]) < 0:
            return
        dtype = schema.field(fields[0]).type
        if not (pa.types.is_integer(dtype) or pa.types.is_string(dtype)):
            return
        # A string column (Spark may store the source that way) orders as text, not as numbers,
        # so only equality tests translate for it.
        self.ranges = pa.types.is_integer(dtype)
        try:
            self.zone = ZoneInfo(zone_name)
        except (ZoneInfoNotFoundError, ValueError):
            return
        self.field, self.unit, self.pattern = fields[0], unit, pattern

    def _path(self, value: int | str) -> str | None:
        try:
            seconds = int(value) // self.unit
        except ValueError:
            return None  # not an epoch number: that value cannot be in any partition's rows
        moment = datetime.fromtimestamp(seconds, tz=timezone.utc).astimezone(self.zone)
        return moment.strftime(self.pattern)

    def translate(self, filters: Sequence[BoundFilter]) -> list[BoundFilter]:
        out: list[BoundFilter] = []
        if self.field is None:
            return out
        string = pa.string()
        for f in filters:
            if f.column != self.field:
                continue
            if f.op == "in":
                paths = sorted({p for p in map(self._path, f.value.to_pylist()) if p is not None})
                if paths:
                    out.append(BoundFilter(PARTITION_PATH_COLUMN, "in", pa.array(paths, string), string))
                continue
            # A path is the floor of its rows' times, so strict bounds become inclusive.
            op = {"=": "=", ">": ">=", ">=": ">=", "<": "<=", "<=": "<="}.get(f.op)
            if op is None or (op != "=" and not self.ranges):
                continue
            path = self._path(f.value.as_py())
            if path is not None:
                out.append(BoundFilter(PARTITION_PATH_COLUMN, op, pa.scalar(path, string), string))
        return out


class PartitionScheme:
    """How a table's partition paths map to its partition columns."""

    def __init__(self, config: TableConfig, schema: pa.Schema):
        self.fields = list(config.partition_fields)
        self.hive_style = config.hive_style_partitioning
        self.url_encoded = config.url_encoded_partitioning
        opaque = _timestamp_fields(config)
        self.value_fields: list[pa.Field] = [
            schema.field(name)
            for name in self.fields
            if name not in opaque and schema.get_field_index(name) >= 0 and _prunable_type(schema.field(name).type)
        ]
        self.timestamp_filters = TimestampPathFilters(config, schema)

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

    def prune(self, partitions: Sequence[str], filters: Sequence[BoundFilter]) -> list[str]:
        """Partitions that may hold rows matching ``filters`` (filters on other columns are ignored)."""
        if not filters or not partitions:
            return list(partitions)
        table = self.values_table(partitions)
        kept = filter_table(table, list(filters) + self.timestamp_filters.translate(filters))
        return kept.column(PARTITION_PATH_COLUMN).to_pylist() if kept.num_rows != table.num_rows else list(partitions)

    def typed_values(self, path: str) -> dict[str, pa.Scalar]:
        """Typed values of ``path`` for the fields that can be typed (to rebuild dropped columns)."""
        table = self.values_table([path])
        return {name: table.column(name)[0] for name in table.column_names if name != PARTITION_PATH_COLUMN}


__all__ = ["PARTITION_PATH_COLUMN", "PartitionScheme"]
