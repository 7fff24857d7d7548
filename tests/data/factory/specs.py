"""The factory's table matrix: small named specs, each a list of steps Hudi's Spark writer runs.

Pure Python (standard library only): it is imported by the writer, which runs in the Spark venv,
and by the tests, which run in the project venv. A spec's rows are derived from record ids and a
step ``version``, so every run writes the same data (only Hudi's instant times differ).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from itertools import product
from typing import Mapping

COW = "COPY_ON_WRITE"
MOR = "MERGE_ON_READ"

RELEASES = ("0.13.1", "0.15.0", "1.0.2", "1.1.1", "1.2.0")
#: table version each release writes
TABLE_VERSIONS = {"0.13.1": 5, "0.15.0": 6, "1.0.2": 8, "1.1.1": 9, "1.2.0": 9}
#: Hudi 0.13 has no Spark 3.5 bundle: its writer runs on Spark 3.2 (the newest 0.13 bundle published)
SPARK_32_RELEASES = ("0.13.1",)
#: the releases whose writer runs on Spark 3.5, which every spec writes unless it names its releases
SPARK_35_RELEASES = tuple(r for r in RELEASES if r not in SPARK_32_RELEASES)


def spark_bundle(release: str) -> str:
    """The artifact id of Hudi ``release``'s Spark bundle the factory writes with."""
    spark = "3.2" if release in SPARK_32_RELEASES else "3.5"
    return f"hudi-spark{spark}-bundle_2.12"


#: column sets; ``basic`` is what most specs write
BASIC_SCHEMA = "id string, name string, price double, ts long, part string"
TYPED_SCHEMA = (
    "id string, name string, price double, ts long, part string, amount decimal(10,2), day date, "
    "at timestamp, tags array<string>, attrs map<string,int>, info struct<rank:int,label:string>"
)
#: the VECTOR/VARIANT/BLOB columns of Hudi 1.2's Lance tables are declared by the writer (they need
#: Spark field metadata, which a DDL string cannot carry)
LANCE_SCHEMA = (
    "id string, name string, price double, ts long, part string, embedding array<float>, "
    "payload struct<type:string,data:binary,reference:struct<external_path:string,offset:bigint,length:bigint,"
    "managed:boolean>>"
)
#: VARIANT needs Spark 4 (Hudi refuses it on Spark 3.5): its own table, so the others are written
LANCE_VARIANT_SCHEMA = f"{LANCE_SCHEMA}, doc struct<metadata:binary not null,value:binary not null>"
#: columns a secondary index is built on, holding values that need escaping in its keys (issue 21)
SECONDARY_INDEX_SCHEMA = "id string, name string, price double, ts long, part string, code int, day date, at timestamp"
#: the ``name`` values of ``SECONDARY_INDEX_SCHEMA`` rows: ``$`` and ``\\`` are escaped in index keys,
#: null is a key of its own (Hudi 1.1+)
SECONDARY_INDEX_NAMES = ("a$b", "x\\y", "$", "", None, "plain")
#: an option value that removes the factory's default of that option (``spark_steps.writer_options``)
UNSET = "<unset>"
#: a second partition field (``grp``, an int) for multi-level partitions
GROUPED_SCHEMA = f"{BASIC_SCHEMA}, grp int"
#: Hudi 1.2 type of the Lance specs' columns, given to Spark as the field metadata ``hudi_type``
HUDI_TYPES = {"embedding": "VECTOR(3)", "payload": "BLOB", "doc": "VARIANT"}
PARTITIONS = ("p0", "p1", "p2")


@dataclass(frozen=True)
class Write:
    """One DataFrame write of records ``ids`` at ``version`` (``hoodie.datasource.write.operation``)."""

    operation: str
    ids: tuple[int, ...]
    version: int = 1
    options: Mapping[str, str] = field(default_factory=dict)
    #: the columns of this write when they differ from the spec's (a later write's own schema)
    schema: str | None = None


@dataclass(frozen=True)
class Sql:
    """A Spark SQL statement (procedure calls, DDL, UPDATE/DELETE/MERGE).

    ``{table}`` names the table registered on the written path, ``{path}`` is its base path and
    ``{last}`` / ``{first}`` the requested time of the latest / earliest completed data instant.
    """

    statement: str


@dataclass(frozen=True)
class Bootstrap:
    """Hudi's bootstrap of a plain Parquet dataset holding records ``ids`` at ``version``.

    The writer first writes that dataset with plain Spark into ``source/`` beside the table (one
    folder per partition value), then runs the
    ``bootstrap`` write operation on it. ``mode`` is ``METADATA_ONLY`` (skeleton files of
    ``_hoodie_*`` columns pointing at the source files) or ``FULL_RECORD`` (a full rewrite).
    """

    mode: str
    ids: tuple[int, ...]
    version: int = 1
    #: write the source as Spark's ``partitionBy`` does (``part=<value>/`` folders, the column
    #: left out of the files) instead of ``<value>/`` folders keeping it
    hive_style: bool = False


Step = Write | Sql | Bootstrap


@dataclass(frozen=True)
class TableSpec:
    """A table the factory writes with every release in ``releases``.

    Attributes:
        name: file name (stable once committed) of ``<release>/<name>.tar.xz``.
        table_type: ``COPY_ON_WRITE`` or ``MERGE_ON_READ``.
        steps: what the writer does, in order.
        options: writer options for every write (on top of the factory defaults).
        schema: a Spark DDL column list (``BASIC_SCHEMA``, ``TYPED_SCHEMA``, ``LANCE_SCHEMA``).
        features: tags naming what the table exercises; ``cdc`` and ``lance`` route the checks to
            those features.
        releases: the releases that write it.
        partitioned: whether ``part`` is the partition field.
    """

    name: str
    table_type: str
    steps: tuple[Step, ...]
    options: Mapping[str, str] = field(default_factory=dict)
    schema: str = BASIC_SCHEMA
    features: tuple[str, ...] = ()
    releases: tuple[str, ...] = SPARK_35_RELEASES
    partitioned: bool = True

    def options_for(self, release: str) -> dict[str, str]:
        """``options`` under the names ``release`` reads (Hudi 0.14 renamed some)."""
        if release not in BEFORE_0_14:
            return dict(self.options)
        renamed = {}
        for key, value in self.options.items():
            for new, old in RENAMED_IN_0_14.items():
                if key.startswith(new):
                    key = old + key[len(new):]
            renamed[key] = value
        return renamed

    @property
    def is_mor(self) -> bool:
        return self.table_type == MOR

    @property
    def bootstraps(self) -> bool:
        """Whether the table is bootstrapped from a source dataset (archived beside it)."""
        return any(isinstance(step, Bootstrap) for step in self.steps)


def ids(start: int, stop: int) -> tuple[int, ...]:
    return tuple(range(start, stop))


def row(record_id: int, version: int, schema: str) -> tuple:
    """The record ``record_id`` as written at ``version`` (Python values in ``schema``'s order)."""
    import datetime
    import decimal

    base: tuple = (
        f"id{record_id:03d}",
        f"name{record_id}_v{version}",
        round(record_id * 1.25 + version, 2),
        version * 1000 + record_id,
        PARTITIONS[record_id % len(PARTITIONS)],
    )
    if schema == TYPED_SCHEMA:
        return base + (
            decimal.Decimal(f"{record_id * 10 + version}.{record_id % 100:02d}"),
            datetime.date(2024, 1, 1) + datetime.timedelta(days=record_id + version),
            datetime.datetime(2024, 1, 1, 12, 0, tzinfo=datetime.timezone.utc)
            + datetime.timedelta(minutes=record_id, hours=version),
            [f"t{record_id}", f"v{version}"][: 1 + record_id % 2],
            {"k": record_id, "v": version},
            (record_id * version, f"label{record_id}") if record_id % 4 else None,
        )
    if schema == SECONDARY_INDEX_SCHEMA:
        # few distinct values per column (rows share them), signed and around the epoch
        return (
            "k$2" if record_id == 2 else base[0],
            SECONDARY_INDEX_NAMES[(record_id + version) % len(SECONDARY_INDEX_NAMES)],
            *base[2:],
            (record_id % 5 - 2) * version,
            datetime.date(1969, 12, 30) + datetime.timedelta(days=record_id % 4 + version),
            datetime.datetime(1969, 12, 31, 23, 59, 59, tzinfo=datetime.timezone.utc)
            + datetime.timedelta(microseconds=1500001 * (record_id % 3), hours=version - 1),
        )
    if schema == GROUPED_SCHEMA:
        return base + (record_id % 2,)
    if schema not in (BASIC_SCHEMA, LANCE_SCHEMA, LANCE_VARIANT_SCHEMA):
        from tests.data.factory.option_specs import extra_values  # it builds on this module

        return base + extra_values(record_id, version, schema)
    if schema in (LANCE_SCHEMA, LANCE_VARIANT_SCHEMA):
        lance = base + (
            [float(record_id), float(version), 0.5],
            ("INLINE", bytes([record_id % 256, version % 256]) * 3, None),
        )
        # a VARIANT holding the int8 ``record_id``: empty dictionary, primitive header 0x0C
        return lance + ((b"\x01\x00\x00", bytes([0x0C, record_id % 128])),) if schema == LANCE_VARIANT_SCHEMA else lance
    return base


# ---------------------------------------------------------------------------------------------
# Common step lists
INSERT = Write("insert", ids(0, 12), 1)
UPSERT = Write("upsert", ids(8, 16), 2)  # 4 updates, 4 inserts
DELETE = Write("delete", ids(0, 3), 3)
CORE_STEPS = (INSERT, UPSERT, DELETE)

#: one record-index file group: a tiny table needs no more, and each costs a file per commit
RECORD_INDEX = {"hoodie.metadata.record.index.enable": "true", "hoodie.index.type": "RECORD_INDEX",
                "hoodie.metadata.record.index.min.filegroup.count": "1",
                "hoodie.metadata.record.index.max.filegroup.count": "1"}
INLINE_COMPACT = {"hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "2"}
#: tables that write the supplemental CDC logs; the modes are Hudi's names since 0.14
CDC_MODES = ("OP_KEY_ONLY", "DATA_BEFORE", "DATA_BEFORE_AFTER")
#: Hudi 0.13 has no record index (it came with 0.14) and takes a CDC mode by its lower-case name
BEFORE_0_14 = ("0.13.1",)
SINCE_0_14 = tuple(r for r in RELEASES if r not in BEFORE_0_14)
#: option names (or name prefixes) since Hudi 0.14 -> their 0.13 names, which 0.13 alone reads
RENAMED_IN_0_14 = {"hoodie.clean.commits.retained": "hoodie.cleaner.commits.retained",
                   "hoodie.keygen.timebased.": "hoodie.deltastreamer.keygen.timebased."}


def _core() -> list[TableSpec]:
    return [
        TableSpec(f"{prefix}_core", table_type, CORE_STEPS, options, features=features, releases=releases)
        for table_type, prefix in ((COW, "cow"), (MOR, "mor"))
        for options, features, releases in ((RECORD_INDEX, ("core", "record_index"), SINCE_0_14),
                                            ({}, ("core",), BEFORE_0_14))
    ]


def _cdc() -> list[TableSpec]:
    specs = []
    for (table_type, prefix), mode, releases in product(((COW, "cow"), (MOR, "mor")), CDC_MODES,
                                                         (SINCE_0_14, BEFORE_0_14)):
        options = {"hoodie.table.cdc.enabled": "true",
                   "hoodie.table.cdc.supplemental.logging.mode": mode.lower() if releases == BEFORE_0_14 else mode}
        steps: tuple[Step, ...] = CORE_STEPS
        if table_type == MOR:
            # compaction turns the log files into a base file: CDC must still see every change
            options = {**options, **INLINE_COMPACT}
            steps = (INSERT, UPSERT, Write("upsert", ids(4, 6), 3), DELETE)
        specs.append(TableSpec(f"{prefix}_cdc_{mode.lower()}", table_type, steps, options, features=("cdc",),
                               releases=releases))
    return specs


def _lance() -> list[TableSpec]:
    # Lance files are written by the Spark-native record path only (Hudi's Avro path refuses them)
    options = {"hoodie.table.base.file.format": "LANCE",
               "hoodie.datasource.write.record.merger.impls": "org.apache.hudi.DefaultSparkRecordMerger",
               **RECORD_INDEX}
    return [
        TableSpec(f"{prefix}_lance", table_type, CORE_STEPS, options, schema=LANCE_SCHEMA,
                  features=("lance", "vector", "blob"), releases=("1.2.0",))
        for table_type, prefix in ((COW, "cow"), (MOR, "mor"))
    ] + [TableSpec("cow_lance_variant", COW, CORE_STEPS, options, schema=LANCE_VARIANT_SCHEMA,
                   features=("lance", "variant"), releases=("1.2.0",))]


ONE_X = ("1.0.2", "1.1.1", "1.2.0")
#: a write whose ordering values (``ts``) are lower than the records it replaces
LATE_ARRIVAL = Write("upsert", ids(4, 8), 0)


def _both(name: str, steps: tuple[Step, ...], options: Mapping[str, str], features: tuple[str, ...],
          releases: tuple[str, ...] = SPARK_35_RELEASES, schema: str = BASIC_SCHEMA,
          types: tuple[str, ...] = (COW, MOR)) -> list[TableSpec]:
    """The COW and/or the MOR table of one feature (``cow_<name>``, ``mor_<name>``)."""
    prefixes = {COW: "cow", MOR: "mor"}
    return [TableSpec(f"{prefixes[table_type]}_{name}", table_type, steps, options, schema=schema,
                      features=features, releases=releases) for table_type in types]


#: keep one commit's files, archive past three instants (1.x: into the LSM history)
CLEAN_ARCHIVE = {"hoodie.clean.commits.retained": "1", "hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3",
                 "hoodie.metadata.compact.max.delta.commits": "2"}
CLEAN_ARCHIVE_STEPS = (INSERT, *(Write("upsert", ids(v, v + 3), v) for v in range(2, 8)))


def _table_services() -> list[TableSpec]:
    return [
        TableSpec("mor_inline_compaction", MOR, (INSERT, UPSERT, Write("upsert", ids(4, 6), 3), DELETE),
                  INLINE_COMPACT, features=("compaction",)),
        TableSpec("mor_scheduled_compaction", MOR, (
            INSERT, UPSERT,
            Sql("CALL run_compaction('schedule', '{table}')"),
            Write("upsert", ids(4, 6), 3),
            Sql("CALL run_compaction('run', '{table}')"),
        ), features=("compaction", "async_compaction")),
        TableSpec("mor_log_compaction", MOR, (
            INSERT, UPSERT, Write("upsert", ids(8, 12), 3), Write("upsert", ids(9, 11), 4),
        ), {"hoodie.log.compaction.inline": "true", "hoodie.log.compaction.blocks.threshold": "2"},
            features=("log_compaction",)),
        *_both("clustering", (INSERT, Write("insert", ids(16, 20), 2), Write("upsert", ids(2, 6), 3)),
               {"hoodie.clustering.inline": "true", "hoodie.clustering.inline.max.commits": "2",
                "hoodie.parquet.small.file.limit": "0"}, ("clustering",)),
        *_both("insert_overwrite", (
            INSERT, Write("insert_overwrite", ids(0, 2), 2),
            Write("delete_partition", ids(2, 3), 3, {"hoodie.datasource.write.partitions.to.delete": "p2"}),
            Write("upsert", ids(3, 5), 4),
        ), {}, ("insert_overwrite", "delete_partition")),
        TableSpec("cow_clean_archive", COW, CLEAN_ARCHIVE_STEPS, CLEAN_ARCHIVE, features=("clean", "archival")),
        TableSpec("mor_clean_archive", MOR, CLEAN_ARCHIVE_STEPS, {**CLEAN_ARCHIVE, **INLINE_COMPACT},
                  features=("clean", "archival", "compaction")),
        # archived commits with every file version kept: incremental ranges from the start reach
        # the archive of a table nothing was cleaned from (issue 30)
        *_both("archive_no_clean", CLEAN_ARCHIVE_STEPS, {**CLEAN_ARCHIVE, "hoodie.clean.automatic": "false"},
               ("archival",), releases=("1.1.1",)),
        *_both("savepoint_restore", (
            INSERT, Sql("CALL create_savepoint('{table}', '{first}')"),
            UPSERT, DELETE, Sql("CALL rollback_to_savepoint('{table}', '{first}')"),
            Write("upsert", ids(20, 23), 4),
        ), {}, ("savepoint", "restore"), types=(COW,)),
        *_both("rollback", (
            INSERT, UPSERT, Sql("CALL rollback_to_instant('{table}', '{last}')"), DELETE,
        ), {}, ("rollback",), types=(MOR,)),
    ]


def _indexes() -> list[TableSpec]:
    bucket = {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "2"}
    stats = {"hoodie.metadata.index.column.stats.enable": "true"}
    return [
        *_both("bucket_simple", CORE_STEPS, {**bucket, "hoodie.index.bucket.engine": "SIMPLE"}, ("bucket_index",), types=(MOR,)),
        TableSpec("mor_bucket_consistent", MOR, CORE_STEPS,
                  {**bucket, "hoodie.index.bucket.engine": "CONSISTENT_HASHING"}, features=("bucket_index",)),
        *_both("column_stats", CORE_STEPS, {**stats, "hoodie.metadata.index.partition.stats.enable": "true"},
               ("column_stats", "partition_stats"), releases=ONE_X, types=(COW,)),
        TableSpec("cow_column_stats_v6", COW, CORE_STEPS, stats, features=("column_stats",), releases=("0.15.0",)),
        *_both("secondary_index", (
            INSERT,
            # Hudi builds an index asynchronously and asks for a lock provider even for one writer
            Sql("SET hoodie.write.lock.provider=org.apache.hudi.client.transaction.lock.InProcessLockProvider"),
            Sql("CREATE INDEX idx_name ON {table} (name)"),
            Sql("CREATE INDEX idx_ts ON {table} USING column_stats(ts) OPTIONS(expr='from_unixtime', format='yyyy')"),
            UPSERT, DELETE,
        ), RECORD_INDEX, ("secondary_index", "expression_index", "record_index"), releases=ONE_X, types=(MOR,)),
        _index_values(MOR, ("name", "code", "day", "at"), ONE_X),
        # copy-on-write, the string index created last: every write rewrites base files
        _index_values(COW, ("code", "day", "at", "name"), ("1.0.2", "1.1.1")),
    ]


def _index_values(table_type: str, indexed: tuple[str, ...], releases: tuple[str, ...]) -> TableSpec:
    """``<cow|mor>_secondary_index_values``: secondary indexes created on ``indexed`` in that order
    over values whose index keys need escaping, then an upsert, updates only (on merge-on-read
    they go to log files) and a delete."""
    return TableSpec(f"{'cow' if table_type == COW else 'mor'}_secondary_index_values", table_type, (
        INSERT,
        Sql("SET hoodie.write.lock.provider=org.apache.hudi.client.transaction.lock.InProcessLockProvider"),
        *(Sql(f"CREATE INDEX idx_{column} ON {{table}} ({column})") for column in indexed),
        UPSERT,
        Write("upsert", (3, 6, 10, 13), 3),  # updates only (UPSERT's inserts rewrite base files)
        Write("delete", (0, 5), 4),
    ), RECORD_INDEX, schema=SECONDARY_INDEX_SCHEMA, features=("secondary_index", "record_index"),
        releases=releases)


def _merging() -> list[TableSpec]:
    commit_time = {"hoodie.write.record.merge.mode": "COMMIT_TIME_ORDERING"}
    event_time = {"hoodie.write.record.merge.mode": "EVENT_TIME_ORDERING"}
    payload = "hoodie.datasource.write.payload.class"
    return [
        *_both("merge_commit_time", (INSERT, LATE_ARRIVAL), commit_time, ("merge_mode",), releases=ONE_X, types=(MOR,)),
        *_both("merge_event_time", (INSERT, LATE_ARRIVAL), event_time, ("merge_mode",), releases=ONE_X, types=(MOR,)),
        *_both("merge_custom_payload", (INSERT, LATE_ARRIVAL, UPSERT),
               {payload: "org.apache.hudi.common.model.OverwriteNonDefaultsWithLatestAvroPayload"},
               ("merge_mode", "custom_payload"), types=(MOR,)),
        *_both("payload_overwrite_latest", (INSERT, LATE_ARRIVAL),
               {payload: "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"}, ("merge_mode",),
               releases=("0.15.0",), types=(MOR,)),
        *_both("payload_default", (INSERT, LATE_ARRIVAL),
               {payload: "org.apache.hudi.common.model.DefaultHoodieRecordPayload"}, ("merge_mode",),
               releases=("0.15.0",), types=(MOR,)),
        TableSpec("mor_partial_update", MOR, (
            INSERT,
            Sql("SET hoodie.spark.sql.merge.into.partial.updates=true"),
            Sql("MERGE INTO {table} t USING (SELECT 'id004' AS id, 99.5 AS price, 5004L AS ts) s ON t.id = s.id "
                "WHEN MATCHED THEN UPDATE SET price = s.price, ts = s.ts"),
            UPSERT,
        ), {"hoodie.spark.sql.merge.into.partial.updates": "true"}, features=("partial_update",), releases=ONE_X),
    ]


def _schemas_and_keys() -> list[TableSpec]:
    timestamp = {
        "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.TimestampBasedKeyGenerator",
        "hoodie.datasource.write.partitionpath.field": "ts",
        "hoodie.keygen.timebased.timestamp.type": "UNIX_TIMESTAMP",
        "hoodie.keygen.timebased.output.dateformat": "yyyyMMddHH",
    }
    return [
        *_both("types", CORE_STEPS, {}, ("nested_types", "logical_types"), schema=TYPED_SCHEMA),
        TableSpec("mor_parquet_log", MOR, CORE_STEPS, {"hoodie.logfile.data.block.format": "parquet"},
                  features=("parquet_log_blocks",)),
        *_both("nonpartitioned", CORE_STEPS, {}, ("nonpartitioned_keygen",), types=(MOR,)),
        *_both("keygen_complex", CORE_STEPS, {
            "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.ComplexKeyGenerator",
            "hoodie.datasource.write.recordkey.field": "id,name",
            "hoodie.datasource.write.partitionpath.field": "part,ts",
        }, ("complex_keygen",), types=(COW,)),
        *_both("keygen_timestamp", CORE_STEPS, timestamp, ("timestamp_keygen",), types=(MOR,)),
        # epoch milliseconds formatted as days: Hudi 1.x answers the field as text (issue 38)
        TableSpec("mor_keygen_timestamp_millis", MOR, CORE_STEPS, {
            **timestamp, "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
            "hoodie.keygen.timebased.output.dateformat": "yyyy-MM-dd",
        }, features=("timestamp_keygen",), releases=("1.1.1",)),
        *_both("keygen_custom", CORE_STEPS, {
            **timestamp,
            "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.CustomKeyGenerator",
            "hoodie.datasource.write.partitionpath.field": "part:simple,ts:timestamp",
        }, ("custom_keygen",), types=(COW,)),
        # merge-on-read with a TIMESTAMP part: how Hudi 1.x's reader types it there (issue 38)
        TableSpec("mor_keygen_custom", MOR, CORE_STEPS, {
            **timestamp,
            "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.CustomKeyGenerator",
            "hoodie.datasource.write.partitionpath.field": "part:simple,ts:timestamp",
        }, features=("custom_keygen",), releases=("1.1.1",)),
        *_both("schema_evolution", (
            INSERT,
            Sql("SET hoodie.schema.on.read.enable=true"),
            Sql("ALTER TABLE {table} ADD COLUMNS (note string)"),
            Sql("ALTER TABLE {table} RENAME COLUMN name TO title"),
            Sql("UPDATE {table} SET note = 'noted', price = price + 1 WHERE id IN ('id004', 'id005')"),
        ), {"hoodie.schema.on.read.enable": "true"}, ("schema_evolution",)),
    ]


#: Hudi leaves the partition columns out of the data files (and its readers fill them from the path)
DROP_PARTITION_COLUMNS = {"hoodie.datasource.write.drop.partition.columns": "true"}


def _dropped_partition_columns() -> list[TableSpec]:
    """Partition columns left out of the data files (Hudi fills them from the partition path): one
    field in plain paths, and two (a string and an int) in hive-style paths (issue 30)."""
    two_fields = {**DROP_PARTITION_COLUMNS,
                  "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.ComplexKeyGenerator",
                  "hoodie.datasource.write.partitionpath.field": "part,grp",
                  "hoodie.datasource.write.hive_style_partitioning": "true"}
    return [*_both("drop_partition_columns", CORE_STEPS, DROP_PARTITION_COLUMNS, ("drop_partition_columns",)),
            *_both("drop_partition_columns_hive", CORE_STEPS, two_fields,
                   ("drop_partition_columns", "hive_style_partitioning", "complex_keygen"), schema=GROUPED_SCHEMA)]


def _orc() -> list[TableSpec]:
    """ORC base files (issue 30): merge-on-read logs stay Avro blocks. Not on Hudi 1.0.2: it writes
    them, but its Spark reader opens every ORC base file as Parquet and fails ("is not a Parquet
    file. Expected magic number at tail"), so it has no answer to compare with. Hudi 0.15.0
    refuses to write them (its ``refused.json``)."""
    return _both("orc", CORE_STEPS, {"hoodie.table.base.file.format": "ORC"}, ("orc",),
                 releases=("0.15.0", "1.1.1", "1.2.0"))


BOOTSTRAP_MODES = ("METADATA_ONLY", "FULL_RECORD")


#: Hudi 1.x refuses to bootstrap with the metadata table's column (and partition) stats, on by default
NO_STATS = {"hoodie.metadata.index.column.stats.enable": "false", "hoodie.metadata.index.partition.stats.enable": "false"}


def _bootstrap() -> list[TableSpec]:
    """A plain Parquet lake bootstrapped in each mode, then upserted and deleted from (issue 21)."""
    return [
        spec
        for mode in BOOTSTRAP_MODES
        for spec in _both(f"bootstrap_{mode.lower()}", (Bootstrap(mode, ids(0, 12), 1), UPSERT, DELETE), NO_STATS,
                          ("bootstrap", f"bootstrap_{mode.lower()}"))
    ] + _both("bootstrap_hive_source", (Bootstrap("METADATA_ONLY", ids(0, 12), 1, hive_style=True), UPSERT, DELETE),
              {**NO_STATS, "hoodie.datasource.write.hive_style_partitioning": "true"},
              ("bootstrap", "bootstrap_metadata_only", "hive_style_partitioning")) + [
        TableSpec("mor_bootstrap_nonpartitioned", MOR, (Bootstrap("METADATA_ONLY", ids(0, 12), 1), UPSERT, DELETE),
                  NO_STATS, features=("bootstrap", "bootstrap_metadata_only", "nonpartitioned_keygen"),
                  partitioned=False)]


#: the breadth specs Hudi 0.13 writes too (the others stay on the Spark 3.5 releases)
_ALSO_BEFORE_0_14 = frozenset({
    "mor_inline_compaction", "mor_scheduled_compaction", "mor_log_compaction", "cow_clustering", "mor_clustering",
    "cow_insert_overwrite", "mor_insert_overwrite",
    "cow_savepoint_restore", "mor_rollback", "mor_bucket_simple", "mor_bucket_consistent",
    "mor_payload_overwrite_latest", "mor_payload_default", "cow_types", "mor_types", "mor_parquet_log",
    "mor_nonpartitioned", "cow_keygen_complex", "mor_keygen_timestamp", "cow_keygen_custom",
    "cow_schema_evolution", "mor_schema_evolution", "mor_merge_custom_payload",
    "cow_bootstrap_metadata_only", "cow_bootstrap_full_record", "cow_bootstrap_hive_source",
})


def _breadth() -> list[TableSpec]:
    """Every other feature, one small table each (after the core, CDC and Lance tables)."""
    specs = (_table_services() + _indexes() + _merging() + _schemas_and_keys() + _bootstrap()
             + _dropped_partition_columns() + _orc())
    return [replace(s, releases=BEFORE_0_14 + s.releases) if s.name in _ALSO_BEFORE_0_14 else s for s in specs]


def all_specs() -> list[TableSpec]:
    from tests.data.factory.bloom_specs import bloom_specs  # they build on this module's steps
    from tests.data.factory.cdc_specs import cdc_inference_specs
    from tests.data.factory.option_specs import option_specs
    from tests.data.factory.storage_specs import storage_specs

    return (_core() + _cdc() + _lance() + _breadth() + cdc_inference_specs() + bloom_specs() + option_specs()
            + storage_specs())


def specs_for(release: str, names: list[str] | None = None) -> list[TableSpec]:
    """The specs ``release`` writes: all of them, or those in ``names`` in that order."""
    specs = [s for s in all_specs() if release in s.releases]
    if names is None:
        return specs
    by_name = {s.name: s for s in specs}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise SystemExit(f"no spec {', '.join(unknown)} for Hudi {release}")
    return [by_name[n] for n in names]
