"""Writer options past the core matrix (issue 30): storage and file sizing, metadata-table indexes,
table services, concurrency control and Hudi 1.2's types on Parquet base files.

Each group names the options it sets and the releases that have them; a table is written with the
oldest and the newest release of that range the factory carries (0.15.0 is its oldest Spark 3.5
bundle), and with every release where the releases disagree (HFile log blocks, expression indexes,
NBCC). Pure Python, like ``specs``; ``specs.all_specs`` adds these.
"""

from __future__ import annotations

from tests.data.factory.specs import (
    CORE_STEPS,
    COW,
    INLINE_COMPACT,
    INSERT,
    LANCE_SCHEMA,
    LANCE_VARIANT_SCHEMA,
    MOR,
    ONE_X,
    SPARK_35_RELEASES,
    TYPED_SCHEMA,
    UPSERT,
    Sql,
    TableSpec,
    Write,
    ids,
)

#: every option here exists on every release from 0.15.0 on
SINCE_0_15 = ("0.15.0", "1.2.0")
#: options of table version 8+ (Hudi 1.0 on)
SINCE_1_0 = ("1.0.2", "1.2.0")
#: the lock provider Hudi asks for before it builds an index or runs concurrent writers
IN_PROCESS_LOCK = {"hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.InProcessLockProvider"}
#: a second upsert after ``UPSERT`` (updates only) and a delete: three write kinds on every table
LATER_UPDATE = Write("upsert", ids(4, 8), 3)
DELETE_LATER = Write("delete", ids(0, 3), 4)
#: no small base files to grow: a merge-on-read upsert logs its updates (inserts open new file groups)
LOGGED_UPDATES = {"hoodie.parquet.small.file.limit": "0"}


def _storage() -> list[TableSpec]:
    """``hoodie.parquet.compression.codec`` (one codec per commit: zstd, gzip, uncompressed, lz4_raw),
    ``hoodie.parquet.max.file.size`` with ``hoodie.copyonwrite.record.size.estimate`` (several file
    groups per partition), ``hoodie.parquet.block.size`` / ``page.size`` (several row groups and
    pages), ``hoodie.logfile.max.size`` / ``hoodie.logfile.data.block.max.size`` (log files rolled
    over, several data blocks per commit), ``hoodie.parquet.outputtimestamptype`` (INT96,
    TIMESTAMP_MILLIS; Hudi 0.15's ``bulk_insert`` row writer writes INT96, 1.2's files keep INT64
    microseconds) with ``hoodie.parquet.writelegacyformat.enabled``, and HFile log data blocks
    (``hoodie.logfile.data.block.format=hfile``). All since 0.x: written with 0.15.0 and 1.2.0."""
    codec = "hoodie.parquet.compression.codec"
    sizing = {"hoodie.parquet.max.file.size": "3072", "hoodie.copyonwrite.record.size.estimate": "1024",
              "hoodie.parquet.small.file.limit": "0"}
    timestamps = (Write("bulk_insert", ids(0, 12), 1), UPSERT, Write("delete", ids(0, 3), 3))
    return [
        TableSpec("cow_parquet_codecs", COW, (
            Write("insert", ids(0, 12), 1, {codec: "zstd"}),
            Write("upsert", ids(8, 16), 2, {codec: "gzip"}),
            Write("upsert", ids(4, 8), 3, {codec: "uncompressed"}),
            Write("upsert", ids(0, 2), 4, {codec: "lz4_raw"}),
        ), features=("parquet_codecs",), releases=SINCE_0_15),
        *(TableSpec(f"{prefix}_file_sizing", table_type, (INSERT, UPSERT, LATER_UPDATE, DELETE_LATER), sizing,
                    features=("file_sizing",), releases=SINCE_0_15) for table_type, prefix in ((COW, "cow"), (MOR, "mor"))),
        # Parquet checks a row group's size from its 100th record on: 200 records per partition
        TableSpec("cow_row_groups", COW, (Write("insert", ids(0, 600), 1), Write("upsert", ids(100, 130), 2)),
                  {"hoodie.parquet.block.size": "2048", "hoodie.parquet.page.size": "512"},
                  features=("row_groups",), releases=SINCE_0_15),
        TableSpec("mor_log_rollover", MOR, (INSERT, UPSERT, LATER_UPDATE, DELETE_LATER),
                  {**LOGGED_UPDATES, "hoodie.logfile.max.size": "1", "hoodie.logfile.data.block.max.size": "200"},
                  features=("log_rollover",), releases=SINCE_0_15),
        TableSpec("cow_timestamp_int96", COW, timestamps,
                  {"hoodie.parquet.outputtimestamptype": "INT96", "hoodie.parquet.writelegacyformat.enabled": "true"},
                  schema=TYPED_SCHEMA, features=("int96", "legacy_parquet"), releases=SINCE_0_15),
        # bulk inserts only: Hudi 0.15 refuses to merge an upsert into an INT96 base file
        TableSpec("cow_timestamp_int96_bulk", COW, (Write("bulk_insert", ids(0, 12), 1), Write("bulk_insert", ids(12, 16), 2)),
                  {"hoodie.parquet.outputtimestamptype": "INT96"}, schema=TYPED_SCHEMA, features=("int96",),
                  releases=("0.15.0",)),
        # Hudi 1.2's Spark-native record path (its files keep INT64 microseconds all the same)
        TableSpec("cow_timestamp_int96_spark", COW, timestamps,
                  {"hoodie.parquet.outputtimestamptype": "INT96", "hoodie.parquet.writelegacyformat.enabled": "true",
                   "hoodie.datasource.write.record.merger.impls": "org.apache.hudi.DefaultSparkRecordMerger"},
                  schema=TYPED_SCHEMA, features=("int96", "legacy_parquet"), releases=("1.2.0",)),
        TableSpec("cow_timestamp_millis", COW, timestamps, {"hoodie.parquet.outputtimestamptype": "TIMESTAMP_MILLIS"},
                  schema=TYPED_SCHEMA, features=("timestamp_millis",), releases=SINCE_0_15),
        # every release: Hudi 1.2 reads back none of the blocks it writes (0.15 does)
        TableSpec("mor_hfile_log", MOR, CORE_STEPS, {**LOGGED_UPDATES, "hoodie.logfile.data.block.format": "hfile"},
                  features=("hfile_log_blocks",), releases=SPARK_35_RELEASES),
    ]


def _metadata_table() -> list[TableSpec]:
    """``hoodie.metadata.enable=false`` (planning by listing storage; 0.x and 1.x), the metadata
    table deleted by a later write that disables it, column stats limited to
    ``hoodie.metadata.index.column.stats.column.list`` (0.15 on), and expression indexes of
    ``lower``, ``substring``, ``date_format`` and ``year`` kept as column stats (1.x)."""
    off = {"hoodie.metadata.enable": "false"}
    steps_dropping = (INSERT, Write("upsert", UPSERT.ids, 2, off), Write("delete", ids(0, 3), 3, off))
    both = ((COW, "cow"), (MOR, "mor"))
    return [
        *(TableSpec(f"{prefix}_no_metadata", table_type, CORE_STEPS, off, features=("no_metadata_table",),
                    releases=SINCE_0_15) for table_type, prefix in both),
        *(TableSpec(f"{prefix}_metadata_dropped", table_type, steps_dropping, features=("metadata_table_dropped",),
                    releases=SINCE_0_15) for table_type, prefix in both),
        TableSpec("cow_column_stats_columns", COW, CORE_STEPS,
                  {"hoodie.metadata.index.column.stats.enable": "true",
                   "hoodie.metadata.index.column.stats.column.list": "price,ts"},
                  features=("column_stats",), releases=SINCE_0_15),
        TableSpec("cow_expression_index", COW, (
            INSERT,
            Sql(f"SET hoodie.write.lock.provider={IN_PROCESS_LOCK['hoodie.write.lock.provider']}"),
            Sql("CREATE INDEX idx_lower ON {table} USING column_stats(name) OPTIONS(expr='lower')"),
            Sql("CREATE INDEX idx_substr ON {table} USING column_stats(id) OPTIONS(expr='substring', pos='1', len='4')"),
            Sql("CREATE INDEX idx_month ON {table} USING column_stats(at) OPTIONS(expr='date_format', format='yyyy-MM')"),
            Sql("CREATE INDEX idx_year ON {table} USING column_stats(day) OPTIONS(expr='year')"),
            UPSERT, Write("delete", ids(0, 3), 3),
        ), schema=TYPED_SCHEMA, features=("expression_index", "column_stats"), releases=ONE_X),
    ]


def _table_services() -> list[TableSpec]:
    """Clustering sorted by columns along a space-filling curve (``hoodie.layout.optimize.strategy``
    ``z-order`` / ``hilbert`` with ``hoodie.clustering.plan.strategy.sort.columns``, 0.10 on), a
    clustering plan scheduled inline and never run while later inserts land
    (``hoodie.clustering.schedule.inline``), a compaction that leaves file groups uncompacted
    (``hoodie.compaction.strategy`` BoundedIOCompactionStrategy, ``hoodie.compaction.target.io=0``:
    one file group per plan), cleaning by ``KEEP_LATEST_FILE_VERSIONS`` and ``KEEP_LATEST_BY_HOURS``
    (``hoodie.cleaner.*`` names, read by every release), and archival into the 1.x LSM timeline
    with its compaction (``hoodie.timeline.compaction.batch.size``)."""
    clustering = {"hoodie.clustering.inline": "true", "hoodie.clustering.inline.max.commits": "2",
                  "hoodie.parquet.small.file.limit": "0", "hoodie.clustering.plan.strategy.sort.columns": "price,ts"}
    pending = {"hoodie.clustering.schedule.inline": "true", "hoodie.clustering.inline": "false",
               "hoodie.clustering.inline.max.commits": "2", "hoodie.parquet.small.file.limit": "0"}
    inserts = (INSERT, Write("insert", ids(16, 20), 2), Write("insert", ids(20, 24), 3))
    clean_steps = (INSERT, *(Write("upsert", ids(v, v + 3), v) for v in range(2, 6)))
    archive = {"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3", "hoodie.clean.commits.retained": "1",
               "hoodie.timeline.compaction.batch.size": "2", "hoodie.metadata.compact.max.delta.commits": "2"}
    return [
        *(TableSpec(f"cow_clustering_{curve.replace('-', '')}", COW,
                    (INSERT, Write("insert", ids(16, 20), 2), Write("upsert", ids(2, 6), 3)),
                    {**clustering, "hoodie.layout.optimize.strategy": curve}, features=("clustering", "layout_optimize"),
                    releases=SINCE_0_15) for curve in ("z-order", "hilbert")),
        *(TableSpec(f"{prefix}_clustering_pending", table_type, inserts, pending, features=("pending_clustering",),
                    releases=SINCE_0_15) for table_type, prefix in ((COW, "cow"), (MOR, "mor"))),
        TableSpec("mor_compaction_bounded_io", MOR, (INSERT, UPSERT, LATER_UPDATE, DELETE_LATER),
                  {**INLINE_COMPACT, "hoodie.compaction.strategy":
                   "org.apache.hudi.table.action.compact.strategy.BoundedIOCompactionStrategy",
                   "hoodie.compaction.target.io": "0"}, features=("compaction", "partial_compaction"),
                  releases=SINCE_0_15),
        TableSpec("cow_clean_file_versions", COW, clean_steps,
                  {"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS", "hoodie.cleaner.fileversions.retained": "1"},
                  features=("clean",), releases=SINCE_0_15),
        TableSpec("cow_clean_by_hours", COW, clean_steps,
                  {"hoodie.cleaner.policy": "KEEP_LATEST_BY_HOURS", "hoodie.cleaner.hours.retained": "0"},
                  features=("clean",), releases=SINCE_0_15),
        TableSpec("cow_archive_lsm", COW, (INSERT, *(Write("upsert", ids(v, v + 3), v) for v in range(2, 10))),
                  archive, features=("clean", "archival", "lsm_timeline"), releases=SINCE_1_0),
    ]


def _concurrency() -> list[TableSpec]:
    """Optimistic concurrency control with an in-process lock and lazy rollback of failed writes
    (``hoodie.write.concurrency.mode=optimistic_concurrency_control``,
    ``hoodie.clean.failed.writes.policy=LAZY``; 0.x and 1.x), and Hudi 1.x's non-blocking
    concurrency control on merge-on-read with a simple bucket index (``NON_BLOCKING_CONCURRENCY_CONTROL``:
    every deltacommit writes log files of its own, sliced by completion time; compaction inline)."""
    occ = {**IN_PROCESS_LOCK, "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
           "hoodie.cleaner.policy.failed.writes": "LAZY"}
    nbcc = {**IN_PROCESS_LOCK, "hoodie.write.concurrency.mode": "NON_BLOCKING_CONCURRENCY_CONTROL",
            "hoodie.index.type": "BUCKET", "hoodie.index.bucket.engine": "SIMPLE", "hoodie.bucket.index.num.buckets": "2",
            # Hudi checks the mode against the table type under this name (it refuses the first write without it)
            "hoodie.table.type": MOR}
    return [
        *(TableSpec(f"{prefix}_occ", table_type, CORE_STEPS, occ, features=("occ",), releases=SINCE_0_15)
          for table_type, prefix in ((COW, "cow"), (MOR, "mor"))),
        TableSpec("mor_nbcc", MOR, (INSERT, UPSERT, LATER_UPDATE, DELETE_LATER), {**nbcc, **INLINE_COMPACT},
                  features=("nbcc", "bucket_index", "compaction"), releases=ONE_X),
    ]


def _hudi_types_on_parquet() -> list[TableSpec]:
    """Hudi 1.2's VECTOR and BLOB columns (Spark field metadata ``hudi_type``) in Parquet base files
    and Avro log blocks; VARIANT needs Spark 4, which Hudi says when asked on Spark 3.5."""
    return [
        *(TableSpec(f"{prefix}_vector_blob", table_type, CORE_STEPS, schema=LANCE_SCHEMA, features=("vector", "blob"),
                    releases=("1.2.0",)) for table_type, prefix in ((COW, "cow"), (MOR, "mor"))),
        TableSpec("cow_variant_parquet", COW, CORE_STEPS, schema=LANCE_VARIANT_SCHEMA, features=("variant",),
                  releases=("1.2.0",)),
    ]


def storage_specs() -> list[TableSpec]:
    return _storage() + _metadata_table() + _table_services() + _concurrency() + _hudi_types_on_parquet()
