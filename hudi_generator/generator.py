"""Generate synthetic Hudi tables (table version 8 with timeline layout 2, or version 6 with
layout 1 as Hudi 0.14/0.15 write it), copy-on-write or merge-on-read, optionally with a metadata
table, on any fsspec URL.

``generate(uri, GeneratorSpec(...))`` writes the table; ``expected_table(spec)`` recomputes the
rows a correct reader must return (from the same deterministic data definition, see
:mod:`hudi_generator.data`), so tests compare independent readers against it value by value.
Command line: ``hudi-flight generate URI [options]`` (this module's :func:`main`).
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import random
import sys
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hudi_generator.avro_schema import META_FIELDS, arrow_to_avro
from hudi_generator.column_stats import column_stats_records, indexed_columns
from hudi_generator.commit_metadata import write_stat
from hudi_generator.data import Evolution, PartitionScheme, record_keys, trips_rows, trips_schema
from hudi_generator.log_writer import avro_data_block, delete_block, log_file_name
from hudi_generator.lsm_history import write_lsm_history
from hudi_generator.metadata_table import MetadataTableWriter, column_stats_encoded, files_records, record_index_encoded
from hudi_generator.properties import render_properties, table_checksum
from hudi_generator.schema_evolution import SchemaHistory, evolve, evolved_schema
from hudi_generator.timeline import TABLE_VERSIONS, TimelineLayout

COPY_ON_WRITE, MERGE_ON_READ = "COPY_ON_WRITE", "MERGE_ON_READ"
_EVENT_TIME_STRATEGY = "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"
INDEX_DEFS_PATH = ".hoodie/.index_defs/index.json"


def _instant(t: datetime) -> str:
    """``yyyyMMddHHmmssSSS``."""
    return t.strftime("%Y%m%d%H%M%S") + f"{t.microsecond // 1000:03d}"


@dataclass(frozen=True)
class GeneratorSpec:
    """What to generate. ``partitions=0`` means non-partitioned. Commit 1 inserts ``rows`` rows;
    each later commit updates ``update_fraction`` and deletes ``delete_fraction`` of the live rows
    (COW rewrites the touched base files; MOR writes Avro data + delete log blocks)."""

    rows: int = 1000
    partitions: int = 4
    partition_levels: int = 1
    files_per_partition: int = 1
    row_group_size: int = 128 * 1024
    commits: int = 1
    update_fraction: float = 0.1
    delete_fraction: float = 0.02
    table_type: str = COPY_ON_WRITE
    metadata_table: bool = True
    column_stats: bool = False
    record_index: bool = False
    record_index_shards: int = 0  # file groups of the record index; 0 = one per 250k rows, at most 10
    table_name: str = "trips"
    hive_style: bool = True
    seed: int = 42
    start_time: datetime = datetime(2025, 1, 1, tzinfo=timezone.utc)
    workers: int = 4
    hfile_compression: str = "GZ"
    evolve_schema: bool = False  # schema on read: rename (commit 2), add + promote (3), drop (4)
    archive_commits: int = 0  # the first N commits move to the LSM history (.hoodie/timeline/history)
    table_version: int = 8  # 8 (layout 2) or 6 (layout 1: JSON commits, logs named by base instant)
    mdt_log_compaction: bool = False  # after the last commit, log-compact the MDT files partition's blocks

    def validate(self) -> None:
        problems = []
        if self.rows < 0:
            problems.append("rows must be >= 0")
        if self.partitions < 0:
            problems.append("partitions must be >= 0")
        if self.partition_levels not in (1, 2):
            problems.append("partition_levels must be 1 or 2")
        if self.files_per_partition < 1:
            problems.append("files_per_partition must be >= 1")
        if self.row_group_size < 1:
            problems.append("row_group_size must be >= 1")
        if self.commits < 1:
            problems.append("commits must be >= 1")
        if not 0 <= self.update_fraction <= 1 or not 0 <= self.delete_fraction <= 1:
            problems.append("update_fraction and delete_fraction must be within [0, 1]")
        if self.table_type not in (COPY_ON_WRITE, MERGE_ON_READ):
            problems.append(f"table_type must be {COPY_ON_WRITE} or {MERGE_ON_READ}")
        if (self.column_stats or self.record_index) and not self.metadata_table:
            problems.append("column_stats and record_index need the metadata table")
        if self.record_index_shards < 0:
            problems.append("record_index_shards must be >= 0")
        if not 0 <= self.archive_commits < self.commits:
            problems.append("archive_commits must be >= 0 and leave at least one active commit")
        if self.evolve_schema and self.column_stats:
            problems.append("evolve_schema does not write column_stats")
        if self.workers < 1:
            problems.append("workers must be >= 1")
        if self.mdt_log_compaction and not self.metadata_table:
            problems.append("mdt_log_compaction needs the metadata table")
        if self.table_version not in TABLE_VERSIONS:
            problems.append(f"table_version must be one of {TABLE_VERSIONS}")
        elif self.table_version == 6 and (self.column_stats or self.record_index or self.archive_commits
                                          or self.evolve_schema):
            problems.append("table_version 6 is written without column_stats, record_index, archive_commits "
                            "and evolve_schema")
        if problems:
            raise ValueError("invalid generator spec: " + "; ".join(problems))

    @property
    def scheme(self) -> PartitionScheme:
        return PartitionScheme(max(self.partitions, 1), self.partition_levels, self.hive_style)

    @property
    def n_partitions(self) -> int:
        return max(self.partitions, 1)

    @property
    def n_groups(self) -> int:
        return self.n_partitions * self.files_per_partition

    def partition_path(self, p: int) -> str:
        return self.scheme.path(p) if self.partitions else ""

    def instants(self) -> list[tuple[str, str]]:
        """(requested, completed) per commit, 10 s apart, each completing 2 s after it starts."""
        return [(_instant(self.start_time + timedelta(seconds=10 * k)),
                 _instant(self.start_time + timedelta(seconds=10 * k + 2)))
                for k in range(self.commits)]


@dataclass
class GeneratedTable:
    """Summary of a generated table."""

    uri: str
    spec: GeneratorSpec
    instants: list[tuple[str, str]]
    live_rows: int = 0
    files_written: int = 0
    bytes_written: int = 0
    partitions: list[str] = field(default_factory=list)


@dataclass
class _CommitOutput:
    """What one commit wrote for one file group, and its metadata-table records."""

    stat: dict
    files: dict[str, int]
    col_stats: dict[str, bytes]
    rli: dict[str, bytes]
    rli_deletes: list[str]


@dataclass
class _GroupResult:
    """Per file group: commit number -> output, and the final live row count."""

    partition: str
    commits: dict[int, _CommitOutput]
    live_rows: int


def _file_id(seed: int, group: int) -> str:
    return f"{uuid.UUID(int=random.Random(seed * 1_000_003 + group).getrandbits(128), version=4)}-0"


def _group_rows(spec: GeneratorSpec, group: int) -> tuple[int, np.ndarray]:
    p, slot = divmod(group, spec.files_per_partition)
    return p, np.arange(p + spec.n_partitions * slot, spec.rows, spec.n_groups, dtype=np.int64)


def _history(
    spec: GeneratorSpec, rows: np.ndarray
) -> Iterator[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Per commit, yield ``(commit, version, alive, updated, deleted)`` arrays over ``rows``:
    the state after the commit and what it touched. Commit 1 inserts every row."""
    evo = Evolution(spec.seed, spec.update_fraction, spec.delete_fraction)
    version = np.ones(len(rows), dtype=np.int64)
    alive = np.ones(len(rows), dtype=bool)
    yield 1, version.copy(), alive.copy(), alive.copy(), np.zeros(len(rows), dtype=bool)
    for k in range(2, spec.commits + 1):
        upd, dele = evo.masks(rows, k)
        upd &= alive
        dele &= alive
        version[upd] = k
        alive &= ~dele
        yield k, version.copy(), alive.copy(), upd, dele


def _with_meta(spec: GeneratorSpec, data: pa.Table, rows: np.ndarray, version: np.ndarray, group: int,
               partition: str, file_name: str) -> pa.Table:
    commit_times = pa.array([r for r, _ in spec.instants()], pa.string()).take(pa.array(version - 1))
    seqno = pc.binary_join_element_wise(commit_times, pa.array(np.full(len(rows), group)).cast(pa.string()),
                                        pa.array(rows).cast(pa.string()), "_")
    n = len(rows)
    meta = [commit_times, seqno, data.column("uuid"),
            pa.repeat(pa.scalar(partition), n), pa.repeat(pa.scalar(file_name), n)]
    cols = meta + list(data.columns)
    return pa.Table.from_arrays(cols, names=list(META_FIELDS) + data.column_names)


def expected_table(spec: GeneratorSpec, with_meta: bool = False, as_of: int | None = None,
                   since: int = 0) -> pa.Table:
    """The snapshot a correct reader returns for the table ``spec`` generates (rows in file-group
    order). ``with_meta`` adds ``_hoodie_commit_time``, ``_hoodie_record_key`` and
    ``_hoodie_partition_path``. ``as_of=k``: the snapshot after commit ``k`` (time travel);
    ``since=j``: only rows last written by commits after ``j`` (an incremental read of
    ``(commit j, commit k]``)."""
    spec.validate()
    upto = spec.commits if as_of is None else as_of
    if not 1 <= upto <= spec.commits:
        raise ValueError(f"as_of must be a commit number within 1..{spec.commits}")
    parts = []
    for g in range(spec.n_groups):
        p, rows = _group_rows(spec, g)
        *_, (_, version, alive, _, _) = itertools.islice(_history(spec, rows), upto)
        alive = alive & (version > since)
        t = trips_rows(spec.seed, rows[alive], version[alive], spec.scheme, p)
        if spec.evolve_schema:
            t = evolve(t, upto, version[alive])
        if with_meta:
            full = _with_meta(spec, t, rows[alive], version[alive], g, spec.partition_path(p), "")
            t = full.drop_columns(["_hoodie_commit_seqno", "_hoodie_file_name"])
        parts.append(t)
    if not parts:
        return trips_schema(spec.partition_levels).empty_table()
    return pa.concat_tables(parts)


class _Target:
    """fsspec filesystem + table root; ``write`` returns the byte count stored."""

    def __init__(self, uri: str, storage_options: dict | None) -> None:
        self.fs, self.root = fsspec.core.url_to_fs(uri, **(storage_options or {}))
        self.root = self.root.rstrip("/")
        self.is_local = "file" in (self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,))
        self._dirs: set[str] = set()

    def write(self, rel: str, data: bytes) -> int:
        path = f"{self.root}/{rel}"
        parent = path.rsplit("/", 1)[0]
        if self.is_local and parent not in self._dirs:
            self.fs.makedirs(parent, exist_ok=True)
            self._dirs.add(parent)
        with self.fs.open(path, "wb") as f:
            f.write(data)
        return len(data)

    def under(self, prefix: str) -> Callable[[str, bytes], int]:
        return lambda rel, data: self.write(f"{prefix}/{rel}", data)


class _TableWriter:
    def __init__(self, spec: GeneratorSpec, target: _Target) -> None:
        self.spec = spec
        self.target = target
        self.instants = spec.instants()
        schema = trips_schema(spec.partition_levels)
        ns = f"hoodie.{spec.table_name}"
        self.avro_schema = arrow_to_avro(schema, f"{spec.table_name}_record", ns)
        self.avro_schema_json = json.dumps(self.avro_schema)
        self.log_schema = arrow_to_avro(schema, f"{spec.table_name}_record", ns, with_meta_fields=True)
        self.log_schema_json = json.dumps(self.log_schema)
        self.is_mor = spec.table_type == MERGE_ON_READ
        self.layout = TimelineLayout(spec.table_version)
        self.history = SchemaHistory(schema, [r for r, _ in self.instants]) if spec.evolve_schema else None
        self._schemas: dict[int, tuple[dict, str, dict, str]] = {}
        self.archived: list[tuple[str, str, str, bytes]] = []

    def schemas_at(self, k: int) -> tuple[dict, str, dict, str]:
        """(Avro schema, its JSON, the same with meta fields, its JSON) of commit ``k``."""
        if self.history is None:
            return self.avro_schema, self.avro_schema_json, self.log_schema, self.log_schema_json
        if k not in self._schemas:
            schema = evolved_schema(trips_schema(self.spec.partition_levels), k)
            name, ns = f"{self.spec.table_name}_record", f"hoodie.{self.spec.table_name}"
            avro = arrow_to_avro(schema, name, ns)
            log = arrow_to_avro(schema, name, ns, with_meta_fields=True)
            self._schemas[k] = (avro, json.dumps(avro), log, json.dumps(log))
        return self._schemas[k]

    def data_at(self, data: pa.Table, k: int, version: np.ndarray) -> pa.Table:
        return evolve(data, k, version) if self.history is not None else data

    def _base_file(self, rel_dir: str, name: str, table: pa.Table, k: int = 1) -> tuple[int, pq.FileMetaData]:
        """Write one parquet base file; return its size and footer metadata."""
        keys = table.column("_hoodie_record_key")
        meta = {
            "parquet.avro.schema": self.schemas_at(k)[3],
            "writer.model.name": "avro",
            "hoodie_min_record_key": pc.min(keys).as_py() or "",
            "hoodie_max_record_key": pc.max(keys).as_py() or "",
        }
        buf = io.BytesIO()
        footers: list[pq.FileMetaData] = []
        pq.write_table(table.replace_schema_metadata(meta), buf, row_group_size=self.spec.row_group_size,
                       compression="snappy", metadata_collector=footers)
        size = self.target.write(f"{rel_dir}/{name}" if rel_dir else name, buf.getvalue())
        return size, footers[0]

    def _stats(
        self, table: pa.Table, partition: str, file_name: str, footer: pq.FileMetaData | None = None
    ) -> dict[str, bytes]:
        if not self.spec.column_stats:
            return {}
        return column_stats_encoded(list(column_stats_records(table, partition, file_name, footer)))

    def write_group(self, g: int) -> _GroupResult:
        """Write every version of file group ``g``: the commit-1 base file, then per touched commit
        a rewritten base file (COW) or a log file with an Avro data block and/or a delete block (MOR)."""
        spec = self.spec
        p, rows = _group_rows(spec, g)
        part = spec.partition_path(p)
        prefix = f"{part}/" if part else ""
        fid = _file_id(spec.seed, g)
        out: dict[int, _CommitOutput] = {}
        if not len(rows):  # Hudi creates no file group without records
            return _GroupResult(part, out, 0)
        base_name, base_instant, live = None, "null", 0
        log_files: list[str] = []
        for k, version, alive, upd, dele in _history(spec, rows):
            instant = self.instants[k - 1][0]
            token = f"{g % 1000}-{k}-{g}"
            if k > 1 and not (upd.any() or dele.any()):
                continue
            if k == 1 or not self.is_mor:
                name = f"{fid}_{token}_{instant}.parquet"
                data = trips_rows(spec.seed, rows[alive], version[alive], spec.scheme, p)
                data = self.data_at(data, k, version[alive])
                full = _with_meta(spec, data, rows[alive], version[alive], g, part, name)
                size, footer = self._base_file(part, name, full, k)
                col_stats = self._stats(full, part, name, footer)
                stat = write_stat(
                    fileId=fid, path=prefix + name, prevCommit=base_instant, partitionPath=part,
                    numWrites=int(alive.sum()),
                    numInserts=int(alive.sum()) if k == 1 else 0, numUpdateWrites=int(upd.sum()) if k > 1 else 0,
                    numDeletes=int(dele.sum()), totalWriteBytes=size, totalWriteErrors=0, fileSizeInBytes=size,
                    prevBaseFile=base_name, totalLogRecords=0, totalLogBlocks=0, totalCorruptLogBlock=0,
                    totalRollbackBlocks=0,
                )
                base_name, base_instant = name, instant
            else:
                log_version = len(log_files) + 1 if self.layout.layout_version == 1 else 1
                name = log_file_name(fid, self.layout.log_instant(base_instant, instant), token, log_version)
                log_files.append(name)
                blocks, col_stats = [], {}
                if upd.any():
                    t = trips_rows(spec.seed, rows[upd], version[upd], spec.scheme, p)
                    t = self.data_at(t, k, version[upd])
                    full = _with_meta(spec, t, rows[upd], version[upd], g, part, fid)
                    blocks.append(avro_data_block(instant, self.schemas_at(k)[2], full.to_pylist()))
                    col_stats = self._stats(full, part, name)
                if dele.any():
                    keys = record_keys(rows[dele]).to_pylist()
                    blocks.append(delete_block(instant, ((key, part) for key in keys), self.schemas_at(k)[2]))
                size = self.target.write(prefix + name, b"".join(blocks))
                stat = write_stat(
                    fileId=fid, path=prefix + name, prevCommit=base_instant, partitionPath=part,
                    numWrites=int(upd.sum()),
                    numUpdateWrites=int(upd.sum()), numDeletes=int(dele.sum()), numInserts=0, totalWriteBytes=size,
                    totalWriteErrors=0, fileSizeInBytes=size, logVersion=log_version, logOffset=0, baseFile=base_name,
                    logFiles=list(log_files) if self.layout.layout_version == 1 else [name],
                    totalLogRecords=0, totalLogBlocks=0, totalCorruptLogBlock=0, totalRollbackBlocks=0,
                )
            rli, rli_deletes = {}, []
            if spec.record_index:
                if k == 1:
                    rli = record_index_encoded(record_keys(rows).to_pylist(), part, fid, _epoch_ms(instant))
                rli_deletes = record_keys(rows[dele]).to_pylist()
            out[k] = _CommitOutput(stat, {name: size}, col_stats, rli, rli_deletes)
            live = int(alive.sum())
        return _GroupResult(part, out, live)

    def write_partition_metadata(self) -> list[str]:
        # partition p holds row p first, so only the first ``rows`` partitions exist
        paths = [self.spec.partition_path(p) for p in range(min(self.spec.n_partitions, self.spec.rows))]
        if self.spec.partitions:
            content = render_properties(
                {"commitTime": self.instants[0][0], "partitionDepth": str(self.spec.partition_levels)},
                "partition metadata",
            )
            with ThreadPoolExecutor(self.spec.workers) as pool:
                list(pool.map(lambda p: self.target.write(f"{p}/.hoodie_partition_metadata", content), paths))
        return paths

    def properties(self) -> dict[str, str]:
        spec = self.spec
        fields = PartitionScheme(1, spec.partition_levels).fields if spec.partitions else []
        if spec.table_version == 6:
            return self._properties_v6(fields)
        props = {
            "hoodie.table.name": spec.table_name,
            "hoodie.database.name": "default",
            "hoodie.table.type": spec.table_type,
            "hoodie.table.version": "8",
            "hoodie.table.initial.version": "8",
            "hoodie.timeline.layout.version": "2",
            "hoodie.timeline.path": "timeline",
            "hoodie.timeline.history.path": "history",
            "hoodie.archivelog.folder": "archived",
            "hoodie.table.recordkey.fields": "uuid",
            "hoodie.table.precombine.field": "ts",
            "hoodie.table.keygenerator.type": (
                ("COMPLEX" if len(fields) > 1 else "SIMPLE") if fields else "NON_PARTITION"
            ),
            "hoodie.datasource.write.hive_style_partitioning": str(spec.hive_style).lower(),
            "hoodie.datasource.write.partitionpath.urlencode": "false",
            "hoodie.datasource.write.drop.partition.columns": "false",
            "hoodie.record.merge.mode": "EVENT_TIME_ORDERING",
            "hoodie.record.merge.strategy.id": _EVENT_TIME_STRATEGY,
            "hoodie.compaction.payload.class": "org.apache.hudi.common.model.DefaultHoodieRecordPayload",
            "hoodie.table.base.file.format": "PARQUET",
            "hoodie.populate.meta.fields": "true",
            "hoodie.table.create.schema": self.avro_schema_json,
            "hoodie.table.metadata.partitions": ",".join(self.mdt_partitions),
            "hoodie.table.metadata.partitions.inflight": "",
            "hoodie.table.checksum": table_checksum("default", spec.table_name),
            "hoodie.table.timeline.timezone": "UTC",
        }
        if fields:
            props["hoodie.table.partition.fields"] = ",".join(fields)
        if spec.column_stats:
            props["hoodie.table.index.defs.path"] = INDEX_DEFS_PATH
        return props

    def _properties_v6(self, fields: list[str]) -> dict[str, str]:
        """hoodie.properties of a Hudi 0.14/0.15 table (keys as in the external v6 fixtures):
        key generator class instead of type, payload class + merger strategy instead of merge mode."""
        spec = self.spec
        keygen = ("ComplexKeyGenerator" if len(fields) > 1 else "SimpleKeyGenerator") if fields \
            else "NonpartitionedKeyGenerator"
        props = {
            "hoodie.table.name": spec.table_name,
            "hoodie.database.name": "default",
            "hoodie.table.type": spec.table_type,
            "hoodie.table.version": "6",
            "hoodie.timeline.layout.version": "1",
            "hoodie.archivelog.folder": "archived",
            "hoodie.table.recordkey.fields": "uuid",
            "hoodie.table.precombine.field": "ts",
            "hoodie.table.keygenerator.class": f"org.apache.hudi.keygen.{keygen}",
            "hoodie.datasource.write.hive_style_partitioning": str(spec.hive_style).lower(),
            "hoodie.datasource.write.partitionpath.urlencode": "false",
            "hoodie.datasource.write.drop.partition.columns": "false",
            "hoodie.partition.metafile.use.base.format": "false",
            "hoodie.compaction.payload.class": "org.apache.hudi.common.model.DefaultHoodieRecordPayload",
            "hoodie.compaction.record.merger.strategy": _EVENT_TIME_STRATEGY,
            "hoodie.table.base.file.format": "PARQUET",
            "hoodie.populate.meta.fields": "true",
            "hoodie.table.cdc.enabled": "false",
            "hoodie.table.create.schema": self.avro_schema_json,
            "hoodie.table.metadata.partitions": ",".join(self.mdt_partitions),
            "hoodie.table.metadata.partitions.inflight": "",
            "hoodie.table.checksum": table_checksum("default", spec.table_name),
            "hoodie.table.timeline.timezone": "UTC",
        }
        if fields:
            props["hoodie.table.partition.fields"] = ",".join(fields)
        return props

    @property
    def mdt_partitions(self) -> list[str]:
        if not self.spec.metadata_table:
            return []
        wanted = {"files": True, "column_stats": self.spec.column_stats, "record_index": self.spec.record_index}
        return sorted(p for p, on in wanted.items() if on)

    @property
    def record_index_shards(self) -> int:
        return self.spec.record_index_shards or min(10, max(1, -(-self.spec.rows // 250_000)))

    def index_definitions(self) -> bytes:
        """``.hoodie/.index_defs/index.json`` naming the columns the column_stats partition covers."""
        meta = [pa.field(name, pa.string()) for name in META_FIELDS]
        columns = indexed_columns(pa.schema(meta + list(trips_schema(self.spec.partition_levels))))
        return json.dumps({"indexDefinitions": {"column_stats": {
            "indexName": "column_stats", "indexType": "column_stats", "indexFunction": "column_stats",
            "sourceFields": columns, "indexOptions": {}}}}, indent=2).encode()

    def write_instant(self, k: int, stats: dict[str, list[dict]]) -> None:
        requested, completed = self.instants[k - 1]
        action = "deltacommit" if self.is_mor else "commit"
        operation = "INSERT" if k == 1 else "UPSERT"
        extra = None
        if self.history is not None:
            extra = {"latest_schema": self.history.latest_schema_json(k)}
            sc = ".hoodie/.schema/"
            self.target.write(f"{sc}{requested}.schemacommit.requested", b"")
            self.target.write(f"{sc}{requested}.schemacommit.inflight", b"")
            self.target.write(f"{sc}{requested}.schemacommit", self.history.history_json(k).encode())
        metadata = self.layout.commit_metadata(stats, operation, self.schemas_at(k)[1], extra_metadata=extra)
        if k <= self.spec.archive_commits:
            # archived: Hudi's archiver moves the instant to the LSM history and deletes its files
            self.archived.append((requested, completed, action, metadata))
            return
        for rel, data in self.layout.instant_files(requested, completed, action, metadata):
            self.target.write(rel, data)

    def write_history(self) -> None:
        write_lsm_history(self.target.under(".hoodie/timeline/history"), self.archived)


def _epoch_ms(instant: str) -> int:
    """Epoch milliseconds of an instant string (the generator's timeline zone is UTC)."""
    t = datetime.strptime(instant[:14], "%Y%m%d%H%M%S").replace(tzinfo=timezone.utc)
    return int(t.timestamp()) * 1000 + int(instant[14:])


def _mdt_time(instant: str, millis: int) -> str:
    return _instant(
        datetime.strptime(instant[:14], "%Y%m%d%H%M%S") + timedelta(milliseconds=int(instant[14:]) + millis)
    )


def generate(
    uri: str,
    spec: GeneratorSpec | None = None,
    storage_options: dict | None = None,
    progress: Callable[[str], None] | None = None,
) -> GeneratedTable:
    """Write the table described by ``spec`` at ``uri`` (which must not already hold a table).

    ``progress`` hears a line as each file group is written (every commit's files of it) and as
    each commit completes: the command line prints them, so a large table is not written in silence.
    """
    spec = spec or GeneratorSpec()
    spec.validate()
    target = _Target(uri, storage_options)
    if target.fs.exists(f"{target.root}/.hoodie/hoodie.properties"):
        raise FileExistsError(f"refusing to overwrite the existing Hudi table at {uri}")
    writer = _TableWriter(spec, target)
    result = GeneratedTable(uri, spec, writer.instants)
    result.partitions = writer.write_partition_metadata()

    per_commit: dict[int, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    added: dict[int, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(dict))
    col_stats: dict[int, dict[str, bytes]] = defaultdict(dict)
    rli: dict[int, dict[str, bytes]] = defaultdict(dict)
    rli_deletes: dict[int, list[str]] = defaultdict(list)
    with ThreadPoolExecutor(spec.workers) as pool:
        for done, res in enumerate(pool.map(writer.write_group, range(spec.n_groups)), start=1):
            if progress is not None:
                progress(f"file groups written: {done}/{spec.n_groups}")
            result.live_rows += res.live_rows
            for k, c in res.commits.items():
                per_commit[k][res.partition].append(c.stat)
                added[k][res.partition].update(c.files)
                col_stats[k].update(c.col_stats)
                rli[k].update(c.rli)
                rli_deletes[k].extend(c.rli_deletes)
                result.files_written += len(c.files)
                result.bytes_written += sum(c.files.values())

    mdt = None
    if writer.mdt_partitions:
        mdt = MetadataTableWriter(target.under(".hoodie/metadata"), spec.table_name, writer.mdt_partitions,
                                  spec.hfile_compression, shards={"record_index": writer.record_index_shards},
                                  table_version=spec.table_version)
        if spec.column_stats:
            target.write(INDEX_DEFS_PATH, writer.index_definitions())

    def mdt_records(k: int) -> dict[str, dict[str, bytes]]:
        return {"files": files_records(added.pop(k, {})), "column_stats": col_stats.pop(k, {}),
                "record_index": rli.pop(k, {})}

    if mdt is not None:
        # initialised on the empty table just before the first commit, as Hudi's first write does
        mdt.initialise(_mdt_time(writer.instants[0][0], -1000), {"files": files_records({})})
    for k in range(1, spec.commits + 1):
        requested, completed = writer.instants[k - 1]
        if mdt is not None:
            # the MDT commit lands before the data commit completes, as Hudi's writer does
            mdt.append(requested, _mdt_time(requested, 1000), mdt_records(k), seq=k,
                       deletes={"record_index": rli_deletes.pop(k, [])})
        writer.write_instant(k, per_commit.pop(k, {}))
        if progress is not None:
            progress(f"commit {k}/{spec.commits} completed: instant {requested}")
    if mdt is not None and spec.mdt_log_compaction:
        last = writer.instants[-1][0]
        mdt.log_compact(last + "005", _mdt_time(last, 3000))
    writer.write_history()
    target.write(".hoodie/hoodie.properties", render_properties(writer.properties(), "Updated"))
    return result


def _parser() -> argparse.ArgumentParser:
    d = GeneratorSpec()
    p = argparse.ArgumentParser(
        prog="hudi-flight generate", description="Write a synthetic Hudi table (table version 8 or 6)."
    )
    p.add_argument("uri", help="target table path or fsspec URL (local path, s3://bucket/path, memory://...)")
    p.add_argument("--rows", type=int, default=d.rows)
    p.add_argument("--partitions", type=int, default=d.partitions, help="0 = non-partitioned")
    p.add_argument("--partition-levels", type=int, choices=(1, 2), default=d.partition_levels)
    p.add_argument("--files-per-partition", type=int, default=d.files_per_partition)
    p.add_argument("--row-group-size", type=int, default=d.row_group_size, help="rows per parquet row group")
    p.add_argument("--commits", type=int, default=d.commits)
    p.add_argument("--update-fraction", type=float, default=d.update_fraction)
    p.add_argument("--delete-fraction", type=float, default=d.delete_fraction)
    p.add_argument("--table-type", choices=("cow", "mor"), default="cow")
    p.add_argument("--no-metadata-table", action="store_true", help="skip the metadata table")
    p.add_argument("--column-stats", action="store_true", help="also write the MDT column_stats partition")
    p.add_argument("--record-index", action="store_true", help="also write the MDT record_index partition")
    p.add_argument("--table-name", default=d.table_name)
    p.add_argument("--non-hive-style", action="store_true", help="partition folders hold values only")
    p.add_argument("--evolve-schema", action="store_true",
                   help="schema on read: rename, add, promote and drop columns across commits 2-4")
    p.add_argument("--archive-commits", type=int, default=d.archive_commits,
                   help="move the first N commits to the LSM history (archived timeline)")
    p.add_argument("--table-version", type=int, choices=TABLE_VERSIONS, default=d.table_version,
                   help="8 (timeline layout 2) or 6 (layout 1, as Hudi 0.14/0.15 write it)")
    p.add_argument("--mdt-log-compaction", action="store_true",
                   help="after the last commit, log-compact the metadata table's files partition")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--workers", type=int, default=d.workers)
    p.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE", help="fsspec storage option")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry (``hudi-flight generate``)."""
    args = _parser().parse_args(argv)
    options = {}
    for item in args.storage_option:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--storage-option expects KEY=VALUE, got {item!r}")
        options[key] = value
    spec = GeneratorSpec(
        rows=args.rows, partitions=args.partitions, partition_levels=args.partition_levels,
        files_per_partition=args.files_per_partition, row_group_size=args.row_group_size, commits=args.commits,
        update_fraction=args.update_fraction, delete_fraction=args.delete_fraction,
        table_type=MERGE_ON_READ if args.table_type == "mor" else COPY_ON_WRITE,
        metadata_table=not args.no_metadata_table, column_stats=args.column_stats, record_index=args.record_index,
        table_name=args.table_name, hive_style=not args.non_hive_style, archive_commits=args.archive_commits,
        evolve_schema=args.evolve_schema, table_version=args.table_version,
        mdt_log_compaction=args.mdt_log_compaction,
        seed=args.seed, workers=args.workers,
    )
    try:
        res = generate(args.uri, spec, options or None, progress=lambda line: print(line, file=sys.stderr, flush=True))
    except (ValueError, OSError) as exc:
        raise SystemExit(f"hudi-flight generate: {exc}") from exc
    print(json.dumps({"uri": res.uri, "live_rows": res.live_rows, "files": res.files_written,
                      "bytes": res.bytes_written, "partitions": len(res.partitions),
                      "instants": [r for r, _ in res.instants]}))
    return 0


__all__ = ["COPY_ON_WRITE", "MERGE_ON_READ", "GeneratorSpec", "GeneratedTable", "generate", "expected_table", "main"]


if __name__ == "__main__":
    raise SystemExit(main())
