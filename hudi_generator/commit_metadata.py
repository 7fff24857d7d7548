"""Completed commit metadata: Avro container files for v8 instants (``HoodieCommitMetadata`` and
``HoodieReplaceCommitMetadata``, field names and types per apache/hudi
hudi-common/src/main/avro/HoodieCommitMetadata.avsc and HoodieReplaceCommitMetadata.avsc) and the
JSON text of v6 (layout 1) instants."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

import fastavro

_NS = "org.apache.hudi.avro.model"
_STR = {"type": "string", "avro.java.string": "String"}


def _opt(t: Any) -> list[Any]:
    return ["null", t]


_STAT_FIELDS: list[tuple[str, Any]] = [
    ("fileId", _STR), ("path", _STR), ("prevCommit", _STR), ("numWrites", "long"), ("numDeletes", "long"),
    ("numUpdateWrites", "long"), ("totalWriteBytes", "long"), ("totalWriteErrors", "long"),
    ("partitionPath", _STR), ("totalLogRecords", "long"), ("totalLogFiles", "long"),
    ("totalUpdatedRecordsCompacted", "long"), ("numInserts", "long"), ("totalLogBlocks", "long"),
    ("totalCorruptLogBlock", "long"), ("totalRollbackBlocks", "long"), ("fileSizeInBytes", "long"),
    ("logVersion", "int"), ("logOffset", "long"), ("baseFile", _STR),
    ("logFiles", {"type": "array", "items": _STR, "default": None}),
    ("cdcStats", {"type": "map", "values": "long", "avro.java.string": "String", "default": None}),
    ("prevBaseFile", _STR), ("minEventTime", "long"), ("maxEventTime", "long"),
    ("runtimeStats", {"type": "record", "name": f"{_NS}.HoodieRuntimeStats", "fields": [
        {"name": n, "type": _opt("long"), "default": None}
        for n in ("totalScanTime", "totalCreateTime", "totalUpsertTime")
    ]}),
    ("totalLogFilesCompacted", "long"), ("totalLogReadTimeMs", "long"), ("totalLogSizeCompacted", "long"),
    ("tempPath", _STR), ("numUpdates", "long"),
]

WRITE_STAT_SCHEMA = {
    "type": "record",
    "name": f"{_NS}.HoodieWriteStat",
    "fields": [{"name": n, "type": _opt(t), "default": None} for n, t in _STAT_FIELDS],
}


def _metadata_schema(name: str, replace: bool) -> dict:
    fields = [
        {"name": "partitionToWriteStats",
         "type": _opt({"type": "map", "avro.java.string": "String",
                       "values": {"type": "array", "items": WRITE_STAT_SCHEMA}}),
         "default": None},
        {"name": "compacted", "type": _opt("boolean"), "default": None},
        {"name": "extraMetadata",
         "type": _opt({"type": "map", "values": _STR, "avro.java.string": "String", "default": None}),
         "default": None},
        {"name": "version", "type": ["int", "null"], "default": 1},
        {"name": "operationType", "type": _opt(_STR), "default": None},
    ]
    if replace:
        fields.append({"name": "partitionToReplaceFileIds",
                       "type": _opt({"type": "map", "avro.java.string": "String",
                                     "values": {"type": "array", "items": _STR}}),
                       "default": None})
    return {"type": "record", "name": f"{_NS}.{name}", "fields": fields}


COMMIT_METADATA_SCHEMA = fastavro.parse_schema(_metadata_schema("HoodieCommitMetadata", replace=False))
REPLACE_COMMIT_METADATA_SCHEMA = fastavro.parse_schema(_metadata_schema("HoodieReplaceCommitMetadata", replace=True))


def write_stat(**fields: Any) -> dict:
    """A ``HoodieWriteStat`` record; unspecified fields are null."""
    unknown = set(fields) - {n for n, _ in _STAT_FIELDS}
    if unknown:
        raise ValueError(f"unknown write stat fields {sorted(unknown)}")
    return {n: fields.get(n) for n, _ in _STAT_FIELDS}


def commit_metadata_bytes(
    partition_to_write_stats: Mapping[str, Sequence[dict]],
    operation_type: str,
    schema_json: str,
    compacted: bool = False,
    partition_to_replace_file_ids: Mapping[str, Sequence[str]] | None = None,
    extra_metadata: Mapping[str, str] | None = None,
) -> bytes:
    """One-record Avro object container file for a completed commit/deltacommit (or replacecommit
    when ``partition_to_replace_file_ids`` is given)."""
    record = {
        "partitionToWriteStats": {p: list(s) for p, s in partition_to_write_stats.items()},
        "compacted": compacted,
        "extraMetadata": {"schema": schema_json, **(extra_metadata or {})},
        "version": 1,
        "operationType": operation_type,
    }
    schema = COMMIT_METADATA_SCHEMA
    if partition_to_replace_file_ids is not None:
        record["partitionToReplaceFileIds"] = {p: list(ids) for p, ids in partition_to_replace_file_ids.items()}
        schema = REPLACE_COMMIT_METADATA_SCHEMA
    buf = io.BytesIO()
    fastavro.writer(buf, schema, [record], codec="null")
    return buf.getvalue()


def commit_metadata_json(
    partition_to_write_stats: Mapping[str, Sequence[dict]],
    operation_type: str,
    schema_json: str,
    extra_metadata: Mapping[str, str] | None = None,
) -> bytes:
    """A completed layout-1 (table version 6) commit/deltacommit: ``HoodieCommitMetadata`` as the
    JSON text Hudi 0.14's Jackson writer produces (two-space indent, ``" : "`` separators, write
    stats with every field, nulls included)."""
    record = {
        "partitionToWriteStats": {p: list(s) for p, s in partition_to_write_stats.items()},
        "compacted": False,
        "extraMetadata": {"schema": schema_json, **(extra_metadata or {})},
        "operationType": operation_type,
    }
    return json.dumps(record, indent=2, separators=(",", " : ")).encode("utf-8")
