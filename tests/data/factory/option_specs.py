"""Writer options that change what a reader must do (issue 30): write operations, key generators,
payloads and merge modes, schema handling. One small table per option, on the oldest and newest
release that has it (the factory's Spark 3.5 releases: 0.15.0 to 1.2.0).

Pure Python, like ``specs``; ``specs.all_specs`` adds these. Columns beyond ``BASIC_SCHEMA`` get
their values from ``extra_values`` (``specs.row`` asks it), derived from record id and version
like the basic ones.
"""

from __future__ import annotations

from typing import Callable

from tests.data.factory.specs import (
    BASIC_SCHEMA,
    CORE_STEPS,
    COW,
    DELETE,
    INSERT,
    LATE_ARRIVAL,
    MOR,
    UNSET,
    UPSERT,
    Sql,
    Step,
    TableSpec,
    Write,
    ids,
)

OLDEST_NEWEST = ("0.15.0", "1.2.0")
#: partition values a path cannot hold as they are: ``partitionpath.urlencode`` escapes them
REGIONS = ("a b/c", "x%y=z", "2024-01-01 10:00")
#: partition values holding slashes: without URL encoding each one is a folder per segment
ZONES = ("eu/west", "eu/north", "us/east/1")
#: the version whose writes mark their records deleted (``_hoodie_is_deleted``, an ``Op`` of ``D``)
DELETING_VERSION = 3
#: the version whose writes leave ``memo`` null (a partial update keeps the stored value)
PARTIAL_VERSION = 2


def _with(*columns: str) -> str:
    return ", ".join((BASIC_SCHEMA, *columns))


URL_SCHEMA = _with("region string")
SLASH_SCHEMA = _with("zone string")
NESTED_KEY_SCHEMA = _with("info struct<rank:int,label:string>")
SOFT_DELETE_SCHEMA = _with("_hoodie_is_deleted boolean")
DMS_SCHEMA = _with("Op string")
MEMO_SCHEMA = _with("memo string")
NOTE_SCHEMA = _with("note string")
NARROW_SCHEMA = _with("qty int", "score float")
WIDE_SCHEMA = _with("qty bigint", "score double")
INT_CODE_SCHEMA = _with("code int")
#: floats a double does not represent exactly (0.15, 1.25 ...): a promotion to double tells how it widens
RATIO_SCHEMA = _with("ratio float")
STRING_CODE_SCHEMA = _with("code string")

_VALUES: dict[str, Callable[[int, int], object]] = {
    "region": lambda i, v: REGIONS[i % len(REGIONS)],
    "zone": lambda i, v: ZONES[i % len(ZONES)],
    "info": lambda i, v: (i, f"label{i}_v{v}"),
    "_hoodie_is_deleted": lambda i, v: v == DELETING_VERSION,
    "Op": lambda i, v: "D" if v == DELETING_VERSION else ("I" if v == 1 else "U"),
    "note": lambda i, v: f"note{i}_v{v}",
    "memo": lambda i, v: None if v == PARTIAL_VERSION else f"memo{i}_v{v}",
    "qty": lambda i, v: i * 10 + v,
    "score": lambda i, v: i + v / 4,
    "code": lambda i, v: i * 100 + v,
    "ratio": lambda i, v: i + v / 10 + 0.05,
}


def extra_values(record_id: int, version: int, schema: str) -> tuple:
    """The values of ``schema``'s columns after ``BASIC_SCHEMA``'s, as Python values of their types."""
    if not schema.startswith(BASIC_SCHEMA + ", "):
        raise ValueError(f"not a schema of option_specs: {schema}")
    values = []
    for column in schema[len(BASIC_SCHEMA) + 2:].split(", "):
        name, kind = column.split(" ", 1)
        value = _VALUES[name](record_id, version)
        values.append(str(value) if kind == "string" and value is not None else value)
    return tuple(values)


def _spec(name: str, table_type: str, steps: tuple[Step, ...], options: dict[str, str], features: tuple[str, ...],
          releases: tuple[str, ...] = OLDEST_NEWEST, schema: str = BASIC_SCHEMA) -> TableSpec:
    prefix = "cow" if table_type == COW else "mor"
    return TableSpec(f"{prefix}_{name}", table_type, steps, options, schema=schema, features=features,
                     releases=releases)


def _operations() -> list[TableSpec]:
    """``bulk_insert`` with the row writer (``hoodie.datasource.write.row.writer.enable``, global
    sort) and without it (partition sort, ``hoodie.bulkinsert.sort.mode``); ``insert`` keeping
    duplicate keys (``hoodie.merge.allow.duplicate.on.inserts``) and dropping them
    (``hoodie.datasource.write.insert.drop.duplicates``); ``insert_overwrite_table``; soft deletes
    (``_hoodie_is_deleted``) and Spark SQL ``DELETE FROM``. All since before 0.15."""
    bulk = (
        Write("bulk_insert", ids(0, 8), 1, {"hoodie.datasource.write.row.writer.enable": "true",
                                             "hoodie.bulkinsert.sort.mode": "GLOBAL_SORT"}),
        Write("bulk_insert", ids(8, 12), 1, {"hoodie.datasource.write.row.writer.enable": "false",
                                              "hoodie.bulkinsert.sort.mode": "PARTITION_SORT"}),
        UPSERT, DELETE,
    )
    duplicates = (
        INSERT,
        # ids 4 and 5 again, 4 twice in the same batch
        Write("insert", (4, 4, 5), 2, {"hoodie.merge.allow.duplicate.on.inserts": "true"}),
        Write("insert", ids(10, 14), 3, {"hoodie.datasource.write.insert.drop.duplicates": "true"}),
    )
    overwrite = (INSERT, Write("insert_overwrite_table", ids(0, 2), 2), Write("upsert", ids(3, 5), 3))
    soft_delete = (
        INSERT,
        Write("upsert", ids(0, 3), DELETING_VERSION),  # _hoodie_is_deleted = true
        Sql("DELETE FROM {table} WHERE id = 'id005'"),
        Write("upsert", (1, 7), 4),  # a soft-deleted key inserted again, and an update
    )
    return [
        _spec("bulk_insert", COW, bulk, {}, ("bulk_insert",)),
        _spec("bulk_insert", MOR, bulk, {}, ("bulk_insert",), releases=("1.2.0",)),
        _spec("insert_duplicates", COW, duplicates, {}, ("insert_duplicates",)),
        _spec("insert_duplicates", MOR, duplicates, {}, ("insert_duplicates",), releases=("1.2.0",)),
        _spec("insert_overwrite_table", COW, overwrite, {}, ("insert_overwrite",)),
        _spec("insert_overwrite_table", MOR, overwrite, {}, ("insert_overwrite",), releases=("1.2.0",)),
        _spec("soft_delete", COW, soft_delete, {}, ("soft_delete", "sql_delete"), releases=("1.2.0",),
              schema=SOFT_DELETE_SCHEMA),
        _spec("soft_delete", MOR, soft_delete, {}, ("soft_delete", "sql_delete"), schema=SOFT_DELETE_SCHEMA),
    ]


def _keys() -> list[TableSpec]:
    """Tables without a record key (keys generated by Hudi, 0.14+); virtual keys (no ``_hoodie_*``
    columns in the files, ``hoodie.populate.meta.fields=false``); deletes by a
    ``GlobalDeleteKeyGenerator`` under a global index; partition values URL-encoded
    (``hoodie.datasource.write.partitionpath.urlencode``) and holding slashes (one folder level
    per segment); a nested record key field."""
    auto_keys = {"hoodie.datasource.write.recordkey.field": UNSET, "hoodie.datasource.write.precombine.field": UNSET}
    auto_steps = (
        INSERT, Write("insert", ids(12, 16), 2),
        Sql("DELETE FROM {table} WHERE id = 'id004'"),
        Sql("UPDATE {table} SET price = 99.5 WHERE id = 'id007'"),
    )
    global_delete = (
        INSERT, UPSERT,
        Write("delete", ids(0, 3), 3,
              {"hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.GlobalDeleteKeyGenerator"}),
    )
    return [
        _spec("auto_keys", COW, auto_steps, auto_keys, ("auto_keys", "sql_delete"), releases=("1.2.0",)),
        _spec("auto_keys", MOR, auto_steps, auto_keys, ("auto_keys", "sql_delete")),
        _spec("virtual_keys", MOR, CORE_STEPS, {"hoodie.populate.meta.fields": "false"}, ("virtual_keys",)),
        _spec("virtual_keys", COW, CORE_STEPS, {"hoodie.populate.meta.fields": "false"}, ("virtual_keys",),
              releases=("1.2.0",)),
        _spec("keygen_global_delete", MOR, global_delete, {"hoodie.index.type": "GLOBAL_SIMPLE"},
              ("global_delete_keygen", "global_index")),
        _spec("partition_urlencode", COW, CORE_STEPS,
              {"hoodie.datasource.write.partitionpath.field": "region",
               "hoodie.datasource.write.partitionpath.urlencode": "true"},
              ("partition_urlencode",), releases=("0.15.0", "1.1.1", "1.2.0"), schema=URL_SCHEMA),
        _spec("partition_slashes", MOR, CORE_STEPS, {"hoodie.datasource.write.partitionpath.field": "zone"},
              ("partition_slashes",), schema=SLASH_SCHEMA),
        _spec("nested_key", COW, CORE_STEPS, {"hoodie.datasource.write.recordkey.field": "info.rank"},
              ("nested_key",), releases=("0.15.0",), schema=NESTED_KEY_SCHEMA),
        _spec("nested_key", MOR, CORE_STEPS, {"hoodie.datasource.write.recordkey.field": "info.rank"},
              ("nested_key",), releases=("1.2.0",), schema=NESTED_KEY_SCHEMA),
    ]


PAYLOAD = "hoodie.datasource.write.payload.class"


def _payloads() -> list[TableSpec]:
    """Payload classes Hudi ships (``PartialUpdateAvroPayload``, ``EventTimeAvroPayload``,
    ``AWSDmsAvroPayload``: an ``Op`` of ``D`` deletes); tables without an ordering field (1.x);
    Spark-native records (``DefaultSparkRecordMerger``, Parquet log blocks); log blocks with
    record positions (``hoodie.write.record.positions``, 1.x)."""
    model = "org.apache.hudi.common.model."
    no_ordering = {"hoodie.datasource.write.precombine.field": UNSET}
    return [
        _spec("payload_partial_update", MOR, (INSERT, Write("upsert", ids(4, 10), PARTIAL_VERSION), LATE_ARRIVAL),
              {PAYLOAD: model + "PartialUpdateAvroPayload"}, ("merge_mode", "payload_partial_update"),
              schema=MEMO_SCHEMA),
        _spec("payload_event_time", MOR, (INSERT, LATE_ARRIVAL, UPSERT), {PAYLOAD: model + "EventTimeAvroPayload"},
              ("merge_mode", "payload_event_time")),
        _spec("payload_aws_dms", MOR, (INSERT, Write("upsert", ids(0, 3), DELETING_VERSION), UPSERT),
              {PAYLOAD: model + "AWSDmsAvroPayload"}, ("merge_mode", "payload_aws_dms"), schema=DMS_SCHEMA),
        _spec("no_ordering_field", MOR, (INSERT, LATE_ARRIVAL, UPSERT, DELETE), no_ordering, ("no_ordering_field",),
              releases=("1.0.2", "1.2.0")),
        _spec("no_ordering_field", COW, (INSERT, LATE_ARRIVAL, DELETE), no_ordering, ("no_ordering_field",),
              releases=("1.2.0",)),
        # Hudi 0.15's merger (HoodieSparkRecordMerger, renamed in 1.0) takes Parquet log blocks only;
        # 1.2's writes Avro ones
        _spec("spark_record_merger", MOR, (INSERT, LATE_ARRIVAL, UPSERT, DELETE),
              {"hoodie.datasource.write.record.merger.impls": "org.apache.hudi.HoodieSparkRecordMerger",
               "hoodie.logfile.data.block.format": "parquet"},
              ("spark_record_merger", "parquet_log_blocks"), releases=("0.15.0",)),
        _spec("spark_record_merger", MOR, (INSERT, LATE_ARRIVAL, UPSERT, DELETE),
              {"hoodie.datasource.write.record.merger.impls": "org.apache.hudi.DefaultSparkRecordMerger"},
              ("spark_record_merger",), releases=("1.2.0",)),
        _spec("record_positions", MOR, (INSERT, Write("upsert", ids(2, 8), 2), Write("delete", (3, 6), 3)),
              {"hoodie.write.record.positions": "true"}, ("record_positions",), releases=("1.0.2", "1.2.0")),
    ]


def _schemas() -> list[TableSpec]:
    """Types promoted by a later write (int to long, float to double, int to string); a column added
    by a later write without schema on read; a write missing a column, with
    ``hoodie.datasource.write.reconcile.schema`` or ``hoodie.write.set.null.for.missing.columns``
    (0.14+); schema on read's ``DROP COLUMN``, nested ``ADD COLUMNS`` and ``ALTER COLUMN ... TYPE``."""
    promote = (INSERT, Write("upsert", ids(8, 16), 2, schema=WIDE_SCHEMA), Write("delete", ids(0, 3), 3, schema=WIDE_SCHEMA))
    to_string = (INSERT, Write("upsert", ids(8, 16), 2, schema=STRING_CODE_SCHEMA))
    added = (INSERT, Write("upsert", ids(8, 16), 2, schema=NOTE_SCHEMA))
    missing = (Write("insert", ids(0, 12), 1, schema=NOTE_SCHEMA), Write("upsert", ids(8, 16), 2, schema=BASIC_SCHEMA))
    # DDL only: Hudi 0.15 refuses an UPDATE after it (the nested type change "cannot be read in
    # vectorized mode"). Hudi 1.2 refuses the drop itself (the column is "missing from incoming
    # schema") unless the session allows a write to drop columns
    ddl = (
        INSERT,
        Sql("SET hoodie.schema.on.read.enable=true"),
        Sql("ALTER TABLE {table} ADD COLUMNS (info.extra string)"),
        Sql("ALTER TABLE {table} ALTER COLUMN info.rank TYPE bigint"),
        Sql("ALTER TABLE {table} DROP COLUMN name"),
    )
    allow_drop = (*ddl[:2], Sql("SET hoodie.datasource.write.schema.allow.auto.evolution.column.drop=true"), *ddl[2:])
    on_read = {"hoodie.schema.on.read.enable": "true"}
    # float -> double by schema on read, an update after it, then a compaction rewriting the
    # unchanged rows: Hudi 1.x widens an old float through its text (issue 38)
    float_to_double = (
        INSERT,
        Sql("SET hoodie.schema.on.read.enable=true"),
        Sql("ALTER TABLE {table} ALTER COLUMN ratio TYPE double"),
        Sql("UPDATE {table} SET price = price + 1 WHERE id IN ('id004', 'id005')"),
        Sql("CALL run_compaction('schedule', '{table}')"),
        Sql("CALL run_compaction('run', '{table}')"),
    )
    return [
        _spec("float_to_double", MOR, float_to_double, on_read, ("schema_evolution", "type_promotion", "compaction"),
              releases=("1.1.1",), schema=RATIO_SCHEMA),
        _spec("type_promotion", MOR, promote, {}, ("type_promotion",), schema=NARROW_SCHEMA),
        _spec("type_promotion", COW, promote, {}, ("type_promotion",), releases=("1.2.0",), schema=NARROW_SCHEMA),
        _spec("int_to_string", COW, to_string, {}, ("type_promotion",), releases=("1.2.0",), schema=INT_CODE_SCHEMA),
        _spec("column_added", MOR, added, {}, ("column_added",)),
        _spec("reconcile_schema", MOR, missing, {"hoodie.datasource.write.reconcile.schema": "true"},
              ("reconcile_schema",)),
        _spec("null_for_missing_columns", MOR, missing, {"hoodie.write.set.null.for.missing.columns": "true"},
              ("null_for_missing_columns",), releases=("1.2.0",)),
        _spec("schema_drop_alter", COW, ddl, on_read, ("schema_evolution", "nested_type_change"), releases=("0.15.0",),
              schema=NESTED_KEY_SCHEMA),
        _spec("schema_drop_alter", MOR, allow_drop, on_read, ("schema_evolution", "nested_type_change"), releases=("1.2.0",),
              schema=NESTED_KEY_SCHEMA),
    ]


def option_specs() -> list[TableSpec]:
    return _operations() + _keys() + _payloads() + _schemas()
