"""Hudi log file blocks (format digest section 4): framing, Avro data, delete and HFile blocks."""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Iterable, Mapping

import fastavro

MAGIC = b"#HUDI#"
LOG_FORMAT_VERSION = 1
DATA_BLOCK_VERSION = 3

# block type ordinals
COMMAND, DELETE, AVRO_DATA, HFILE_DATA = 0, 1, 3, 4
# header key ordinals
INSTANT_TIME, TARGET_INSTANT_TIME, SCHEMA, COMPACTED_BLOCK_TIMES = 0, 1, 2, 4

_WRAPPERS = [
    ("BooleanWrapper", "boolean"), ("IntWrapper", "int"), ("LongWrapper", "long"), ("FloatWrapper", "float"),
    ("DoubleWrapper", "double"), ("BytesWrapper", "bytes"), ("StringWrapper", "string"),
    ("DateWrapper", {"type": "int", "logicalType": "date"}),
    ("DecimalWrapper", {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 15}),
    ("TimeMicrosWrapper", {"type": "long", "logicalType": "time-micros"}),
    ("TimestampMicrosWrapper", {"type": "long", "logicalType": "timestamp-micros"}),
]

#: The single-field wrapper records Hudi uses for ordering values and column statistics.
WRAPPER_SCHEMAS = [
    {"type": "record", "name": name, "namespace": "org.apache.hudi.avro.model",
     "fields": [{"name": "value", "type": t}]}
    for name, t in _WRAPPERS
]

#: HoodieDeleteRecordList as Java writes it: orderingVal is a union of single-field wrapper records.
DELETE_RECORD_LIST_SCHEMA = fastavro.parse_schema({
    "type": "record",
    "name": "HoodieDeleteRecordList",
    "namespace": "org.apache.hudi.avro.model",
    "fields": [{
        "name": "deleteRecordList",
        "type": {"type": "array", "items": {
            "type": "record",
            "name": "HoodieDeleteRecord",
            "fields": [
                {"name": "recordKey", "type": ["null", "string"], "default": None},
                {"name": "partitionPath", "type": ["null", "string"], "default": None},
                {"name": "orderingVal", "type": ["null", *WRAPPER_SCHEMAS], "default": None},
            ],
        }},
    }],
})


def _int_map(entries: Mapping[int, str]) -> bytes:
    out = [struct.pack(">i", len(entries))]
    for key, value in entries.items():
        raw = value.encode("utf-8")
        out.append(struct.pack(">ii", key, len(raw)) + raw)
    return b"".join(out)


def frame_block(block_type: int, header: Mapping[int, str], content: bytes) -> bytes:
    """One framed block: magic, size, version, type, header, content, empty footer, reverse pointer."""
    body = (
        struct.pack(">ii", LOG_FORMAT_VERSION, block_type)
        + _int_map(header)
        + struct.pack(">q", len(content))
        + content
        + _int_map({})
    )
    block_size = len(body) + 8  # the size counts the trailing reverse pointer too
    return MAGIC + struct.pack(">q", block_size) + body + struct.pack(">q", block_size + len(MAGIC))


def avro_data_block(instant: str, schema: dict, records: Iterable[dict]) -> bytes:
    """AVRO_DATA block: version, record count, then length-prefixed schemaless Avro records."""
    parsed = fastavro.parse_schema(schema)
    buf = io.BytesIO()
    parts = []
    for rec in records:
        buf.seek(0)
        buf.truncate()
        fastavro.schemaless_writer(buf, parsed, rec)
        raw = buf.getvalue()
        parts.append(struct.pack(">i", len(raw)) + raw)
    content = struct.pack(">ii", DATA_BLOCK_VERSION, len(parts)) + b"".join(parts)
    return frame_block(AVRO_DATA, {INSTANT_TIME: instant, SCHEMA: json.dumps(schema)}, content)


def delete_block(instant: str, keys: Iterable[tuple[str, str]], schema: dict | None = None) -> bytes:
    """DELETE block of (record key, partition path) pairs with the default ordering value
    (IntWrapper 0), i.e. commit-time-ordering deletes, as SQL DELETE writes them."""
    records = [
        {"recordKey": k, "partitionPath": p, "orderingVal": ("org.apache.hudi.avro.model.IntWrapper", {"value": 0})}
        for k, p in keys
    ]
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, DELETE_RECORD_LIST_SCHEMA, {"deleteRecordList": records})
    payload = buf.getvalue()
    content = struct.pack(">ii", DATA_BLOCK_VERSION, len(payload)) + payload
    header = {INSTANT_TIME: instant}
    if schema is not None:
        header[SCHEMA] = json.dumps(schema)
    return frame_block(DELETE, header, content)


def hfile_data_block(instant: str, schema_json: str, hfile: bytes, compacted: Iterable[str] = ()) -> bytes:
    """HFILE_DATA block: the content is a complete HFile. ``compacted``: the instants whose
    blocks this log-compacted block replaces (header ``COMPACTED_BLOCK_TIMES``)."""
    header = {INSTANT_TIME: instant, SCHEMA: schema_json}
    if compacted:
        header[COMPACTED_BLOCK_TIMES] = ",".join(compacted)
    return frame_block(HFILE_DATA, header, hfile)


def log_file_name(file_id: str, instant: str, write_token: str, version: int = 1) -> str:
    """v8 log file name: ``.<fileId>_<deltacommit instant>.log.<version>_<token>``."""
    return f".{file_id}_{instant}.log.{version}_{write_token}"
