"""Decoding of log block content (format doc section 4.4): Avro, Parquet and HFile data blocks,
delete blocks and rollback command blocks.

Data blocks become Arrow tables in their writer schema (the block's ``SCHEMA`` header); the
merge conforms them to the table schema by column name. An HFile data block of a data table
(``hoodie.logfile.data.block.format=hfile``) holds one cell per record: the record key, then the
record in Avro binary encoding, the bodies an Avro block holds; the metadata table's HFile blocks
are read by the metadata-table reader.

Avro records are length-prefixed schemaless Avro. They are re-framed as one in-memory Avro
container block and decoded in one call: by polars' native reader when the schema only uses
types it is verified to decode like fastavro (about 10x faster on the benchmark), otherwise by
fastavro (the only per-record Python loop, unavoidable there).
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Iterable, Mapping

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq

from catalog.errors import CorruptTableError, UnsupportedTableError
from catalog.format.avro import avro_to_arrow_schema, parse_avro_schema, records_to_arrow
from catalog.format.hfile import HFileReader
from catalog.format.kryo import decode_kryo_deletes
from catalog.format.log_file import BlockType, LogBlock

#: The only command Hudi writes (``COMMAND_BLOCK_TYPE`` header value).
ROLLBACK_COMMAND = "0"

# Field order of the ordering-value wrapper union, as the Java writer declares it (4.4).
_WRAPPERS = (
    ("BooleanWrapper", "boolean"),
    ("IntWrapper", "int"),
    ("LongWrapper", "long"),
    ("FloatWrapper", "float"),
    ("DoubleWrapper", "double"),
    ("BytesWrapper", "bytes"),
    ("StringWrapper", "string"),
    ("DateWrapper", {"type": "int", "logicalType": "date"}),
    ("DecimalWrapper", {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 15}),
    ("TimeMicrosWrapper", {"type": "long", "logicalType": "time-micros"}),
    ("TimestampMicrosWrapper", {"type": "long", "logicalType": "timestamp-micros"}),
)
_DELETE_LIST_SCHEMA = fastavro.parse_schema(
    {
        "type": "record",
        "name": "HoodieDeleteRecordList",
        "namespace": "org.apache.hudi.avro.model",
        "fields": [
            {
                "name": "deleteRecordList",
                "type": {
                    "type": "array",
                    "items": {
                        "type": "record",
                        "name": "HoodieDeleteRecord",
                        "fields": [
                            {"name": "recordKey", "type": ["null", "string"]},
                            {"name": "partitionPath", "type": ["null", "string"]},
                            {
                                "name": "orderingVal",
                                "type": ["null"]
                                + [
                                    {"type": "record", "name": n, "fields": [{"name": "value", "type": t}]}
                                    for n, t in _WRAPPERS
                                ],
                            },
                        ],
                    },
                },
            }
        ],
    }
)


@dataclass(frozen=True)
class DeleteRecords:
    """Keys deleted by one delete block with their ordering values (``None`` = no ordering)."""

    record_keys: pa.Array  # string
    partition_paths: pa.Array  # string
    ordering_values: list[Any]

    def __len__(self) -> int:
        return len(self.record_keys)


def _where(block: LogBlock) -> str:
    return f"{block.path} block at offset {block.offset}"


@lru_cache(maxsize=64)
def _writer_schema(text: str) -> tuple[Any, pa.Schema]:
    """Parsed fastavro schema and the Arrow schema of a block's ``SCHEMA`` header (cached:
    every block of a table usually carries the same text)."""
    record = parse_avro_schema(text)
    return fastavro.parse_schema(dict(record)), avro_to_arrow_schema(record)


def _schema_text(block: LogBlock) -> str:
    text = block.header.get("SCHEMA")
    if not text:
        raise CorruptTableError(f"{_where(block)}: data block without a SCHEMA header")
    return text


def _zigzag(n: int) -> bytes:
    """Avro ``long`` encoding (zig-zag varint)."""
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _avro_bytes(data: bytes) -> bytes:
    return _zigzag(len(data)) + data


def _container(schema_text: str, count: int, records: bytes) -> io.BytesIO:
    """An in-memory Avro object container holding the records as one block.

    The block's records are plain schemaless Avro, so wrapping them lets fastavro's compiled
    reader loop decode them in one call instead of one Python call per record.
    """
    sync = b"\x00" * 16
    meta = _zigzag(2) + _avro_bytes(b"avro.schema") + _avro_bytes(schema_text.encode("utf-8"))
    meta += _avro_bytes(b"avro.codec") + _avro_bytes(b"null") + _zigzag(0)
    return io.BytesIO(b"Obj\x01" + meta + sync + _zigzag(count) + _zigzag(len(records)) + records + sync)


def _record_bodies(block: LogBlock, content: bytes, count: int) -> bytes:
    """The records' bytes without their int32 length prefixes, checked against the content size."""
    parts = []
    pos = 8
    end = len(content)
    for _ in range(count):
        if pos + 4 > end:
            raise CorruptTableError(f"{_where(block)}: cannot decode Avro records: content ends early")
        (length,) = struct.unpack_from(">i", content, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise CorruptTableError(
                f"{_where(block)}: cannot decode Avro records: record length {length} runs past the block"
            )
        parts.append(content[pos : pos + length])
        pos += length
    return b"".join(parts)


def decode_avro_block(block: LogBlock, content: bytes, *, allow_polars: bool = True) -> pa.Table:
    """AVRO_DATA content: int32 version, int32 count, then (int32 length, Avro record) pairs.

    Records are decoded with their writer schema (the ``SCHEMA`` header), all at once.
    ``allow_polars=False``: always through fastavro, which keeps a null nested record null (CDC
    images) where polars may return a record of nulls.
    """
    text = _schema_text(block)
    if len(content) < 8:
        raise CorruptTableError(f"{_where(block)}: Avro block content too short")
    version, count = struct.unpack_from(">ii", content, 0)
    if version not in (1, 2, 3):  # one layout in every version (HoodieAvroDataBlock.RecordIterator)
        raise UnsupportedTableError(f"{_where(block)}: unsupported Avro data block version {version}")
    if count < 0:
        raise CorruptTableError(f"{_where(block)}: negative record count {count}")
    return _decode_records(block, text, count, _record_bodies(block, content, count), allow_polars)


def decode_hfile_block(block: LogBlock, content: bytes) -> pa.Table:
    """HFILE_DATA content of a data table: an HFile of (record key, Avro-encoded record) cells."""
    bodies = [value for _, value in HFileReader.from_bytes(content, _where(block)).scan()]
    return _decode_records(block, _schema_text(block), len(bodies), b"".join(bodies), allow_polars=True)


def _decode_records(block: LogBlock, text: str, count: int, bodies: bytes, allow_polars: bool) -> pa.Table:
    """``count`` schemaless Avro records of writer schema ``text``, concatenated in ``bodies``."""
    _, arrow_schema = _writer_schema(text)
    if allow_polars and _polars_can_decode(parse_avro_schema(text)):
        table = _decode_with_polars(text, count, bodies, arrow_schema)
        if table is not None:
            return table
    try:
        records: list[Any] = list(fastavro.reader(_container(text, count, bodies)))
    except (EOFError, ValueError, IndexError, TypeError, struct.error) as err:
        raise CorruptTableError(f"{_where(block)}: cannot decode Avro records: {err}") from err
    if len(records) != count:
        raise CorruptTableError(f"{_where(block)}: cannot decode Avro records: {len(records)} of {count} decoded")
    return records_to_arrow(records, arrow_schema)


# Avro types polars' native reader decodes exactly like fastavro + avro_arrow (checked on every
# fixture block and the generator's schema in tests/test_log_blocks.py); anything else (maps,
# enums, plain fixed, other logical types, multi-branch unions) goes through fastavro.
_POLARS_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "string", "bytes"})
_POLARS_LOGICAL = frozenset({("int", "date"), ("long", "timestamp-micros"), ("bytes", "decimal"), ("fixed", "decimal")})


def _polars_can_decode(node: Any) -> bool:
    if isinstance(node, str):
        return node in _POLARS_PRIMITIVES
    if isinstance(node, list):
        branches = [b for b in node if b != "null"]
        return len(branches) == 1 and _polars_can_decode(branches[0])
    if not isinstance(node, Mapping):
        return False
    kind, logical = node.get("type"), node.get("logicalType")
    if logical is not None:
        return (kind, logical) in _POLARS_LOGICAL and int(node.get("precision", 0)) <= 38
    if kind == "record":
        return all(_polars_can_decode(f.get("type")) for f in node.get("fields", []))
    if kind == "array":
        return _polars_can_decode(node.get("items"))
    return isinstance(kind, (str, list, Mapping)) and kind != node and _polars_can_decode(kind)


def _decode_with_polars(text: str, count: int, bodies: bytes, schema: pa.Schema) -> pa.Table | None:
    """Decode with polars' native Avro reader (an order of magnitude faster than fastavro), cast
    to ``schema`` (polars returns large strings); ``None`` when polars is not installed or
    refuses the data, so that fastavro decodes it or reports the problem."""
    try:
        import polars
    except ImportError:
        return None
    try:
        table = polars.read_avro(_container(text, count, bodies)).to_arrow()
        if table.num_rows != count or table.schema.names != schema.names:
            return None
        return table.cast(schema)
    except Exception:  # noqa: BLE001 - any polars failure: let fastavro decode or report it
        return None


def decode_parquet_block(block: LogBlock, content: bytes) -> pa.Table:
    """PARQUET_DATA content: a complete Parquet file."""
    try:
        # Not pq.read_table: its dataset scan decodes on Arrow's CPU pool, whose threads may drop
        # the last reference to ``content`` (a Python object) while the interpreter exits.
        return pq.ParquetFile(pa.BufferReader(content)).read(use_threads=False)
    except (pa.ArrowInvalid, OSError) as err:
        raise CorruptTableError(f"{_where(block)}: cannot read Parquet block: {err}") from err


def decode_data_block(block: LogBlock, content: bytes) -> pa.Table:
    """The records of an Avro, Parquet or HFile data block as an Arrow table in the writer's schema."""
    if block.block_type is BlockType.AVRO_DATA:
        return decode_avro_block(block, content)
    if block.block_type is BlockType.PARQUET_DATA:
        return decode_parquet_block(block, content)
    if block.block_type is BlockType.HFILE_DATA:
        return decode_hfile_block(block, content)
    raise UnsupportedTableError(f"{_where(block)}: {block.block_type.name} blocks hold no table records")


def decode_cdc_block(block: LogBlock, content: bytes) -> pa.Table:
    """CDC_DATA content (in ``.cdc`` log files): the layout of an Avro data block, records in the
    CDC schema of the table's logging mode (``op``, ``record_key``/``ts_ms``, images)."""
    if block.block_type is not BlockType.CDC_DATA:
        raise UnsupportedTableError(f"{_where(block)}: {block.block_type.name} block in a CDC log file")
    return decode_avro_block(block, content, allow_polars=False)


def decode_delete_block(block: LogBlock, content: bytes) -> DeleteRecords:
    """DELETE content: int32 version, int32 length, then the payload: Avro
    ``HoodieDeleteRecordList`` (version 3) or Kryo ``HoodieKey[]`` / ``DeleteRecord[]`` (versions
    1 and 2, see ``catalog.format.kryo``)."""
    if len(content) < 8:
        raise CorruptTableError(f"{_where(block)}: delete block content too short")
    version, length = struct.unpack_from(">ii", content, 0)
    if version not in (1, 2, 3):
        raise UnsupportedTableError(f"{_where(block)}: unsupported delete block version {version}")
    if length < 0 or 8 + length > len(content):
        raise CorruptTableError(f"{_where(block)}: delete payload length {length} runs past the block")
    if version < 3:
        keys = decode_kryo_deletes(version, content[8 : 8 + length], _where(block))
        return DeleteRecords(
            pa.array([k for k, _, _ in keys], pa.string()),
            pa.array([p for _, p, _ in keys], pa.string()),
            [o for _, _, o in keys],
        )
    try:
        value: Any = fastavro.schemaless_reader(io.BytesIO(content[8 : 8 + length]), _DELETE_LIST_SCHEMA, None)
    except (EOFError, ValueError, IndexError, TypeError) as err:
        raise CorruptTableError(f"{_where(block)}: cannot decode delete records: {err}") from err
    entries = value["deleteRecordList"]
    ordering = [(e["orderingVal"] or {}).get("value") for e in entries]
    return DeleteRecords(
        pa.array([e["recordKey"] for e in entries], pa.string()),
        pa.array([e["partitionPath"] for e in entries], pa.string()),
        ordering,
    )


def decode_record_block(block: LogBlock, content: bytes) -> pa.Table | DeleteRecords:
    """A data block's records (:func:`decode_data_block`) or a delete block's keys
    (:func:`decode_delete_block`): what a merge takes from one block."""
    if block.block_type is BlockType.DELETE:
        return decode_delete_block(block, content)
    return decode_data_block(block, content)


def rollback_target(block: LogBlock) -> str:
    """The instant a rollback command block undoes."""
    kind = block.header.get("COMMAND_BLOCK_TYPE")
    target = block.header.get("TARGET_INSTANT_TIME")
    if kind != ROLLBACK_COMMAND or not target:
        raise CorruptTableError(
            f"{_where(block)}: unknown command block (type {kind!r}, target {target!r})"
        )
    return target



def fold_blocks(blocks: Iterable[LogBlock], accept: Callable[[LogBlock], bool]) -> list[LogBlock]:
    """Blocks in order, skipping corrupt ones, applying rollback command blocks and then log
    compaction (format doc 4.6).

    ``accept`` decides for every other block whether it counts (it may raise to refuse one);
    the data table's scan and the metadata-table reader differ only there.
    """
    kept: list[LogBlock] = []
    for block in blocks:
        if block.block_type is BlockType.CORRUPT:
            continue
        if block.block_type is BlockType.COMMAND:
            target = rollback_target(block)
            kept = [b for b in kept if b.instant_time != target]
        elif accept(block):
            kept.append(block)
    return apply_log_compaction(kept)


def apply_log_compaction(blocks: list[LogBlock]) -> list[LogBlock]:
    """Replace log-compacted instants by the block that compacted them (Hudi 0.14+ log compaction,
    the rule of Java's ``BaseHoodieLogRecordReader`` optimized scan, restated).

    A log-compaction writes one block (instant ``C``, header ``COMPACTED_BLOCK_TIMES`` =
    ``i1,i2,...``) holding the merged records of the blocks of those instants, which stay in their
    log files. Walking the instants newest first (in order of their first block): a compacted
    instant maps each instant it lists to itself, or to whatever already compacted it in turn
    (nested log compaction); a plain instant that no compaction lists stays; one that is listed
    is replaced by its compacted blocks, once, at the position of the newest instant they stand
    for. A compacted block that no surviving instant refers to is not applied (as in Java).
    Blocks come back oldest first, each instant's blocks together in file order.
    """
    if not any("COMPACTED_BLOCK_TIMES" in b.header for b in blocks):
        return blocks
    groups: dict[str, list[LogBlock]] = {}
    for block in blocks:  # dicts keep first-arrival order
        groups.setdefault(block.instant_time or "", []).append(block)
    replaced_by: dict[str, str] = {}
    chosen: list[str] = []  # newest first
    for instant, group in reversed(groups.items()):
        listed = group[0].header.get("COMPACTED_BLOCK_TIMES")
        if listed is not None:
            final = replaced_by.get(instant, instant)
            for original in listed.split(","):
                replaced_by[original] = final
            continue
        final = replaced_by.get(instant, instant)
        if final not in chosen:
            chosen.append(final)
    return [b for instant in reversed(chosen) for b in groups[instant]]


__all__ = [
    "DeleteRecords",
    "ROLLBACK_COMMAND",
    "apply_log_compaction",
    "decode_avro_block",
    "decode_cdc_block",
    "decode_data_block",
    "decode_hfile_block",
    "decode_delete_block",
    "decode_parquet_block",
    "decode_record_block",
    "fold_blocks",
    "rollback_target",
]
