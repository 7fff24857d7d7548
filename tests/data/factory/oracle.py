"""Hudi as the oracle: the queries the factory asks Spark's Hudi datasource about each table.

For every table: the snapshot, the read-optimized view (MOR), time travel to every completed data
instant, incremental reads between consecutive data instants and from the start (to the first
and to the last instant), and for CDC-enabled tables the CDC query over the same ranges.

Instant values: time travel names the requested time (``as.of.instant``); incremental and CDC
ranges name requested times on table version 6 and completion times on version 8+, which is what
each release's ``hoodie.datasource.read.begin/end.instanttime`` compare.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa

from tests.data.factory import spark_steps
from tests.data.factory.archive import Query
from tests.data.factory.specs import TableSpec
from tests.data.factory.timeline import Instant

QUERY_TYPE = "hoodie.datasource.query.type"
BEGIN = "hoodie.datasource.read.begin.instanttime"
END = "hoodie.datasource.read.end.instanttime"
CDC_FORMAT = "hoodie.datasource.query.incremental.format"
#: the beginning of time for Spark's incremental read (``HudiTable.read`` says it with no ``start``)
EARLIEST = "000"
#: Hudi reads a schema-on-read table by column id only when the reader enables it too; without it a
#: renamed column of the files written before the rename reads as null (columns matched by name)
SCHEMA_ON_READ = {"hoodie.schema.on.read.enable": "true"}


def plan(spec: TableSpec, instants: list[Instant], table_version: int) -> list[Query]:
    """The queries to ask about a table with these completed data ``instants``."""
    queries = [Query("snapshot", "snapshot", {QUERY_TYPE: "snapshot"})]
    if spec.is_mor:
        queries.append(Query("read_optimized", "read_optimized", {QUERY_TYPE: "read_optimized"}))
    for instant in instants:
        queries.append(Query(f"as_of_{instant.requested}", "snapshot", {"as.of.instant": instant.requested},
                             as_of=instant.requested))
    times = [i.completed if table_version >= 8 else i.requested for i in instants]
    ranges = list(zip([EARLIEST, *times[:-1]], times))
    if len(times) > 1:
        ranges.append((EARLIEST, times[-1]))
    kinds = ["incremental", "cdc"] if "cdc" in spec.features else ["incremental"]
    for kind in kinds:
        for start, end in ranges:
            options = {QUERY_TYPE: "incremental", BEGIN: start, END: end}
            if kind == "cdc":
                options[CDC_FORMAT] = "cdc"
            queries.append(Query(f"{kind}_{start}_{end}", kind, options, start=None if start == EARLIEST else start,
                                 end=end))
    if "schema_evolution" in spec.features:
        queries = [replace(q, spark_options={**q.spark_options, **SCHEMA_ON_READ}) for q in queries]
    return queries


#: Spark settings the oracle reads ORC tables with: Hudi 1.1's snapshot of an ORC table fails in
#: Spark's vectorized ORC reader ("OrcAtomicColumnVector cannot be cast to OnHeapColumnVector"); its
#: row-by-row ORC reader answers
ORC_SESSION = {"spark.sql.orc.enableVectorizedReader": "false"}
#: Spark settings the oracle reads a nested column whose type changed (schema on read) with: Hudi
#: 0.15's vectorized Parquet reader refuses it ("Nested types with type changes ... cannot be read
#: in vectorized mode") and names this setting as the way round
NESTED_TYPE_CHANGE_SESSION = {"spark.sql.parquet.enableVectorizedReader": "false"}


def _answer(spark, base: Path, query: Query) -> pa.Table:
    from pyspark.sql.pandas.types import to_arrow_schema

    frame = spark.read.format("hudi").options(**query.spark_options).load(str(base))
    schema = to_arrow_schema(frame.schema)
    batches = frame._collect_as_arrow()
    if not batches:
        return schema.empty_table()
    return pa.Table.from_batches(batches).cast(schema) if batches[0].schema != schema else pa.Table.from_batches(batches)


def ask_hudi(spark, spec: TableSpec, base: Path, instants: list[Instant],
             table_version: int) -> tuple[list[Query], dict[str, pa.Table]]:
    """Every planned query with Hudi's answer: (queries with file/rows/error set, file -> rows)."""
    answered: list[Query] = []
    results: dict[str, pa.Table] = {}
    session = {**(ORC_SESSION if "orc" in spec.features else {}),
               **(NESTED_TYPE_CHANGE_SESSION if "nested_type_change" in spec.features else {})}
    for key, value in session.items():
        spark.conf.set(key, value)
    for number, query in enumerate(plan(spec, instants, table_version)):
        try:
            rows = _answer(spark, base, query)
        except Exception as exc:  # noqa: BLE001 - a query Hudi refuses is recorded, not fatal
            answered.append(Query(**{**query.__dict__, "error": spark_steps.java_error(exc)}))
            continue
        file_name = f"q{number:03d}.arrow"
        results[file_name] = rows
        answered.append(Query(**{**query.__dict__, "file": file_name, "rows": rows.num_rows}))
    for key in session:
        spark.conf.unset(key)
    _forget_query_schema(spark)
    return answered, results


#: where Hudi 0.13's copy-on-write reader leaves a schema-on-read table's query schema, in the
#: session's Hadoop configuration: the next table read in the session would be read with it
_QUERY_SCHEMA_KEYS = ("hoodie.schema.internal.querySchema", "hoodie.tablePath", "hoodie.valid.commits.list")


def _forget_query_schema(spark) -> None:
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key in _QUERY_SCHEMA_KEYS:
        hadoop.unset(key)
