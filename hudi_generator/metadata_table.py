"""Writer for the metadata table (format digest section 6): its own hoodie.properties and
timeline, and per MDT partition (``files``, optionally ``column_stats``) one file group with a
base HFile written at the initialisation instant plus one HFILE_DATA log file per later
data-table commit.

Table version 8: initialised at ``00000000000000000``, layout-2 timeline, each MDT deltacommit
writes its own ``log.1`` named with its instant. Table version 6 (as Hudi 0.14/0.15 write it,
checked against the external v6 fixtures): initialised at ``00000000000000010``, layout-1
timeline with JSON commits, every log of a file group named with the base instant
(``.files-0000-0_00000000000000010.log.N``), one more log version per deltacommit; only the
``files`` partition (Hudi 0.14 initialises each further index at its own ``...011``/``...012``
instant, which this writer does not model)."""

from __future__ import annotations

import io
import json
import math
import uuid
from collections.abc import Callable, Mapping, Sequence

import fastavro

from hudi_generator.commit_metadata import write_stat
from hudi_generator.hfile_writer import HFileWriter
from hudi_generator.log_writer import WRAPPER_SCHEMAS, delete_block, hfile_data_block, log_file_name
from hudi_generator.properties import render_properties, table_checksum
from hudi_generator.timeline import TimelineLayout

MDT_INIT_INSTANT = "00000000000000000"
#: the instant each table version initialises the MDT ``files`` partition at
INIT_INSTANTS = {8: MDT_INIT_INSTANT, 6: "00000000000000010"}
ALL_PARTITIONS_KEY = "__all_partitions__"
NON_PARTITIONED_KEY = "."
TYPE_ALL_PARTITIONS, TYPE_FILE_LIST, TYPE_COLUMN_STATS, TYPE_RECORD_INDEX = 1, 2, 3, 5
FILE_ID_PREFIXES = {"files": "files", "column_stats": "col-stats", "record_index": "record-index"}

_NS = "org.apache.hudi.avro.model"
_OPT_STR = ["null", "string"]
_OPT_LONG = ["null", "long"]

#: HoodieMetadataRecord up to the payloads written here, in Hudi's field order (readers decode
#: with the schema embedded in each HFile / block header and read fields by name).
METADATA_RECORD_SCHEMA = {
    "type": "record",
    "name": "HoodieMetadataRecord",
    "namespace": _NS,
    "doc": "A record saved within the Metadata Table",
    "fields": [
        *({"name": n, "type": _OPT_STR, "doc": "", "default": None} for n in (
            "_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
            "_hoodie_file_name")),
        {"name": "key", "type": {"type": "string", "avro.java.string": "String"}},
        {"name": "type", "type": "int"},
        {"name": "filesystemMetadata", "type": ["null", {
            "type": "map", "avro.java.string": "String",
            "values": {"type": "record", "name": "HoodieMetadataFileInfo", "fields": [
                {"name": "size", "type": "long"},
                {"name": "isDeleted", "type": "boolean"},
            ]},
        }], "default": None},
        {"name": "BloomFilterMetadata", "type": ["null", {
            "type": "record", "name": "HoodieMetadataBloomFilter", "fields": [
                {"name": "type", "type": "string"},
                {"name": "timestamp", "type": "string"},
                {"name": "bloomFilter", "type": "bytes"},
                {"name": "isDeleted", "type": "boolean"},
            ]}], "default": None},
        {"name": "ColumnStatsMetadata", "type": ["null", {
            "type": "record", "name": "HoodieMetadataColumnStats", "fields": [
                {"name": "fileName", "type": _OPT_STR, "default": None},
                {"name": "columnName", "type": _OPT_STR, "default": None},
                {"name": "minValue", "type": ["null", *WRAPPER_SCHEMAS], "default": None},
                {"name": "maxValue", "type": ["null", *(f"{_NS}.{w['name']}" for w in WRAPPER_SCHEMAS)],
                 "default": None},
                {"name": "valueCount", "type": _OPT_LONG, "default": None},
                {"name": "nullCount", "type": _OPT_LONG, "default": None},
                {"name": "totalSize", "type": _OPT_LONG, "default": None},
                {"name": "totalUncompressedSize", "type": _OPT_LONG, "default": None},
                {"name": "isDeleted", "type": "boolean"},
                {"name": "isTightBound", "type": "boolean", "default": False},
            ]}], "default": None},
        {"name": "recordIndexMetadata", "type": ["null", {
            "type": "record", "name": "HoodieRecordIndexInfo", "fields": [
                {"name": "partitionName", "type": _OPT_STR, "default": None},
                {"name": "fileIdHighBits", "type": _OPT_LONG, "default": None},
                {"name": "fileIdLowBits", "type": _OPT_LONG, "default": None},
                {"name": "fileIndex", "type": ["null", "int"], "default": None},
                {"name": "fileId", "type": _OPT_STR, "default": None},
                {"name": "instantTime", "type": _OPT_LONG, "default": None},
                {"name": "fileIdEncoding", "type": "int", "default": 0},
                {"name": "position", "type": _OPT_LONG, "default": None},
            ]}], "default": None},
    ],
}
_PARSED = fastavro.parse_schema(METADATA_RECORD_SCHEMA)
_SCHEMA_JSON = json.dumps(METADATA_RECORD_SCHEMA)

Writer = Callable[[str, bytes], int]
#: MDT partition -> {record key: Avro-encoded HoodieMetadataRecord}
Records = dict[str, dict[str, bytes]]


def _encode(record: dict) -> bytes:
    buf = io.BytesIO()
    # the key lives in the HFile row; Hudi writes the Avro field empty
    fastavro.schemaless_writer(buf, _PARSED, {"key": "", **record})
    return buf.getvalue()


def files_records(listing: Mapping[str, Mapping[str, int]]) -> dict[str, bytes]:
    """``files`` records: ``__all_partitions__`` plus one key per partition (``""`` =
    non-partitioned, stored as ``.``) mapping file names to sizes."""
    keyed = {(p or NON_PARTITIONED_KEY): files for p, files in listing.items()}

    def fs_map(files: Mapping[str, int]) -> dict:
        return {name: {"size": size, "isDeleted": False} for name, size in files.items()}

    out = {
        ALL_PARTITIONS_KEY: _encode({"type": TYPE_ALL_PARTITIONS, "filesystemMetadata": fs_map({p: 0 for p in keyed})})
    }
    for p, files in keyed.items():
        out[p] = _encode({"type": TYPE_FILE_LIST, "filesystemMetadata": fs_map(files)})
    return out


def column_stats_encoded(stats: Sequence[tuple[str, dict]]) -> dict[str, bytes]:
    """``column_stats`` records from (key, ColumnStatsMetadata) pairs."""
    return {key: _encode({"type": TYPE_COLUMN_STATS, "ColumnStatsMetadata": payload}) for key, payload in stats}


def record_index_encoded(keys: Sequence[str], partition: str, file_id: str, instant_epoch_ms: int) -> dict[str, bytes]:
    """``record_index`` records locating ``keys`` in the UUID-style file group ``file_id``
    (``<uuid>-<n>``: encoding 0, 64-bit signed high/low halves plus the ``n`` suffix)."""
    raw, _, index = file_id.rpartition("-")
    bits = uuid.UUID(raw).int
    high, low = (bits >> 64), bits & 0xFFFFFFFFFFFFFFFF
    value = _encode({"type": TYPE_RECORD_INDEX, "recordIndexMetadata": {
        "partitionName": partition,
        "fileIdHighBits": high - (1 << 64) if high >= 1 << 63 else high,
        "fileIdLowBits": low - (1 << 64) if low >= 1 << 63 else low,
        "fileIndex": int(index),
        "fileId": "",
        "instantTime": instant_epoch_ms,
        "fileIdEncoding": 0,
    }})
    return dict.fromkeys(keys, value)


def java_string_hash(text: str) -> int:
    """Java ``String.hashCode`` (over UTF-16 code units, 32-bit signed wrap-around)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def shard_of(key: str, shards: int) -> int:
    """Hudi's key-to-file-group mapping: ``abs(abs(hash) % n)`` with Java's int semantics."""
    h = java_string_hash(key)
    a = h if h == -(1 << 31) else abs(h)  # Math.abs(Integer.MIN_VALUE) stays negative
    return abs(int(math.fmod(a, shards)))


def records_hfile(records: Mapping[str, bytes], compression: str = "GZ") -> bytes:
    writer = HFileWriter(compression=compression)
    writer.extend(sorted((k.encode("utf-8"), v) for k, v in records.items()))
    writer.set_file_info("schema", _SCHEMA_JSON.encode())
    return writer.to_bytes()


def mdt_properties(table_name: str, table_version: int = 8) -> dict[str, str]:
    if table_version == 6:
        # key for key as in the external v6 fixtures' .hoodie/metadata/.hoodie/hoodie.properties
        return {
            "hoodie.datasource.write.drop.partition.columns": "false",
            "hoodie.table.type": "MERGE_ON_READ",
            "hoodie.archivelog.folder": "archived",
            "hoodie.populate.meta.fields": "false",
            "hoodie.compaction.payload.class": "org.apache.hudi.metadata.HoodieMetadataPayload",
            "hoodie.timeline.layout.version": "1",
            "hoodie.table.version": "6",
            "hoodie.table.base.file.format": "HFILE",
            "hoodie.table.recordkey.fields": "key",
            "hoodie.table.name": f"{table_name}_metadata",
            "hoodie.table.keygenerator.class": "org.apache.hudi.metadata.HoodieTableMetadataKeyGenerator",
            "hoodie.compaction.record.merger.strategy": "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5",
            "hoodie.table.checksum": table_checksum("", f"{table_name}_metadata"),
        }
    return {
        "hoodie.compaction.payload.class": "org.apache.hudi.metadata.HoodieMetadataPayload",
        "hoodie.table.initial.version": "8",
        "hoodie.table.keygenerator.type": "HOODIE_TABLE_METADATA",
        "hoodie.table.type": "MERGE_ON_READ",
        "hoodie.archivelog.folder": "history",
        "hoodie.timeline.layout.version": "2",
        "hoodie.timeline.history.path": "history",
        "hoodie.datasource.write.drop.partition.columns": "false",
        "hoodie.record.merge.strategy.id": "00000000-0000-0000-0000-000000000000",
        "hoodie.table.recordkey.fields": "key",
        "hoodie.table.name": f"{table_name}_metadata",
        "hoodie.timeline.path": "timeline",
        "hoodie.populate.meta.fields": "false",
        "hoodie.table.base.file.format": "HFILE",
        "hoodie.record.merge.mode": "CUSTOM",
        "hoodie.table.version": "8",
        "hoodie.table.checksum": table_checksum("", f"{table_name}_metadata"),
    }


class MetadataTableWriter:
    """Writes the MDT next to a data table. ``write(relative_path, data) -> size`` stores bytes
    under the MDT base path. ``shards`` gives the number of file groups per MDT partition
    (default 1); keys are spread over them with :func:`shard_of`."""

    def __init__(self, write: Writer, table_name: str, partitions: Sequence[str], compression: str = "GZ",
                 shards: Mapping[str, int] | None = None, table_version: int = 8) -> None:
        unknown = set(partitions) - set(FILE_ID_PREFIXES)
        if unknown or "files" not in partitions:
            raise ValueError(
                f"MDT partitions must include 'files' and be among {sorted(FILE_ID_PREFIXES)}: {list(partitions)}"
            )
        self.layout = TimelineLayout(table_version)
        if table_version == 6 and list(partitions) != ["files"]:
            raise ValueError("a version 6 metadata table is written with the files partition only")
        self.init_instant = INIT_INSTANTS[table_version]
        self._log_versions: dict[str, int] = {}
        self._files_blocks: list[tuple[str, dict[str, bytes]]] = []  # (data instant, records) per append
        self._write = write
        self._compression = compression
        self.partitions = list(partitions)
        self.shards = {p: (shards or {}).get(p, 1) for p in self.partitions}
        self._bases: set[tuple[str, int]] = set()
        write(".hoodie/hoodie.properties",
              render_properties(mdt_properties(table_name, table_version), "Properties saved"))
        for part in self.partitions:
            write(f"{part}/.hoodie_partition_metadata", render_properties(
                {"commitTime": self.init_instant, "partitionDepth": "1"}, "partition metadata"))

    def _file_id(self, part: str, shard: int) -> str:
        return f"{FILE_ID_PREFIXES[part]}-{shard:04d}-0"

    def _base_name(self, part: str, shard: int) -> str:
        return f"{self._file_id(part, shard)}_0-0-0_{self.init_instant}.hfile"

    def _split(self, part: str, records: Mapping[str, bytes]) -> list[dict[str, bytes]]:
        n = self.shards[part]
        if n == 1:
            return [dict(records)]
        out: list[dict[str, bytes]] = [{} for _ in range(n)]
        for key, value in records.items():
            out[shard_of(key, n)][key] = value
        return out

    def _instant(self, requested: str, completed: str, stats: dict[str, list[dict]], operation: str) -> None:
        metadata = self.layout.commit_metadata(stats, operation, _SCHEMA_JSON)
        for rel, data in self.layout.instant_files(requested, completed, "deltacommit", metadata):
            self._write(rel, data)

    def _log_name(self, fid: str, writer_instant: str, token: str) -> tuple[str, int]:
        """The next log file of group ``fid`` and its version: v8 one ``log.1`` per writer
        instant, v6 the next version of the log named with the base instant."""
        count = self._log_versions[fid] = self._log_versions.get(fid, 0) + 1
        version = count if self.layout.layout_version == 1 else 1
        return log_file_name(fid, self.layout.log_instant(self.init_instant, writer_instant), token, version), version

    def initialise(self, completed: str, records: Records) -> None:
        """Bootstrap at the init instant: per file group the empty delete block that seeds
        its log and, when it has records (``files`` always has ``__all_partitions__``), a base
        HFile with its share of ``records[partition]``."""
        stats: dict[str, list[dict]] = {}
        for part in self.partitions:
            for shard, recs in enumerate(self._split(part, records.get(part, {}))):
                fid = self._file_id(part, shard)
                self._write(f"{part}/{self._log_name(fid, self.init_instant, '0-0-0')[0]}",
                            delete_block(self.init_instant, []))
                if not recs:
                    continue
                self._bases.add((part, shard))
                name = self._base_name(part, shard)
                size = self._write(f"{part}/{name}", records_hfile(recs, self._compression))
                stats.setdefault(part, []).append(write_stat(
                    fileId=fid, path=f"{part}/{name}", prevCommit="null", partitionPath=part, numWrites=len(recs),
                    numInserts=len(recs), fileSizeInBytes=size, totalWriteBytes=size, numDeletes=0, numUpdateWrites=0,
                    totalWriteErrors=0))
        self._instant(self.init_instant, completed, stats, "BULK_INSERT_PREPPED")

    def append(self, data_instant: str, completed: str, records: Records, seq: int,
               deletes: Mapping[str, Sequence[str]] | None = None) -> None:
        """One MDT deltacommit (same requested time as the data commit): per touched file group
        a log file with an HFILE_DATA block of ``records`` and/or a DELETE block of ``deletes``."""
        stats: dict[str, list[dict]] = {}
        for part in self.partitions:
            removed = self._split(part, dict.fromkeys((deletes or {}).get(part, ()), b""))
            for shard, recs in enumerate(self._split(part, records.get(part, {}))):
                gone = sorted(removed[shard])
                if not recs and not gone:
                    continue
                fid = self._file_id(part, shard)
                blocks = []
                if recs:
                    blocks.append(hfile_data_block(data_instant, _SCHEMA_JSON, records_hfile(recs, self._compression)))
                    if part == "files":
                        self._files_blocks.append((data_instant, recs))
                if gone:
                    blocks.append(delete_block(data_instant, ((key, part) for key in gone)))
                log_name, log_version = self._log_name(fid, data_instant, f"{shard}-{seq}-{seq}")
                size = self._write(f"{part}/{log_name}", b"".join(blocks))
                stats.setdefault(part, []).append(write_stat(
                    fileId=fid, path=f"{part}/{log_name}", prevCommit=self.init_instant, partitionPath=part,
                    numWrites=len(recs), numUpdateWrites=len(recs), numDeletes=len(gone), fileSizeInBytes=size,
                    totalWriteBytes=size, logVersion=log_version, logOffset=0,
                    baseFile=self._base_name(part, shard) if (part, shard) in self._bases else "",
                    logFiles=[log_name], numInserts=0, totalWriteErrors=0))
        self._instant(data_instant, completed, stats, "UPSERT_PREPPED")

    def log_compact(self, instant: str, completed: str) -> list[str]:
        """One log compaction of the ``files`` partition (Hudi 0.14+; in the MDT its instant is the
        latest deltacommit's plus the suffix ``005``): a new log file holding one HFILE_DATA block
        whose records merge those of every data-commit block so far, its ``COMPACTED_BLOCK_TIMES``
        header listing their instants. The original blocks stay in their log files; readers
        replace them by this block. On the timeline it is a ``logcompaction`` (requested,
        inflight) completing as a ``deltacommit``. Returns the compacted instants."""
        compacted = [i for i, _ in self._files_blocks]
        if not compacted:
            raise ValueError("nothing to log-compact: no data commit wrote to the files partition")
        merged: dict[str, dict] = {}
        for _, recs in self._files_blocks:
            for key, raw in recs.items():
                merged[key] = _merge_files_record(merged.get(key), _decode(raw))
        records = {key: _encode(rec) for key, rec in merged.items()}
        fid = self._file_id("files", 0)
        log_name, log_version = self._log_name(fid, instant, "0-0-0")
        block = hfile_data_block(instant, _SCHEMA_JSON, records_hfile(records, self._compression), compacted)
        size = self._write(f"files/{log_name}", block)
        stats = {"files": [write_stat(
            fileId=fid, path=f"files/{log_name}", prevCommit=self.init_instant, partitionPath="files",
            numWrites=len(records), numUpdateWrites=len(records), numDeletes=0, fileSizeInBytes=size,
            totalWriteBytes=size, logVersion=log_version, logOffset=0, baseFile=self._base_name("files", 0),
            logFiles=[log_name], numInserts=0, totalWriteErrors=0)]}
        metadata = self.layout.commit_metadata(stats, "LOG_COMPACT", _SCHEMA_JSON)
        for rel, data in self.layout.instant_files(instant, completed, "logcompaction", metadata, "deltacommit"):
            self._write(rel, data)
        return compacted


def _decode(raw: bytes) -> dict:
    record = fastavro.schemaless_reader(io.BytesIO(raw), _PARSED)
    assert isinstance(record, dict)  # a HoodieMetadataRecord
    return record


def _merge_files_record(older: dict | None, newer: dict) -> dict:
    """HoodieMetadataPayload's combine for ``files`` records (format digest 6.4): a newer live
    entry keeps the larger size, a newer tombstone removes a live entry."""
    if older is None:
        return newer
    files = dict(older["filesystemMetadata"] or {})
    for name, info in (newer["filesystemMetadata"] or {}).items():
        old = files.get(name)
        if info["isDeleted"]:
            if old is not None and not old["isDeleted"]:
                del files[name]
            else:
                files[name] = info
        elif old is not None and not old["isDeleted"]:
            files[name] = {"size": max(old["size"], info["size"]), "isDeleted": False}
        else:
            files[name] = info
    return {**newer, "filesystemMetadata": files}
