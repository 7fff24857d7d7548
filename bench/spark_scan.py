"""Spark reading Hudi tables four ways, side by side, on the same Hudi-written tables.

The tables are those of :mod:`bench.spark_hudi` (Hudi 1.1.1's Spark writer: a copy-on-write and
a merge-on-read table of the same rows, metadata table with the record index, an upsert of a
tenth of the keys), served by ``hudi-flight serve`` in a subprocess. One SparkSession
(``local[2]``, PySpark 4) holding the connector's jar runs:

* **the connector** (``spark.read.format("hudi-flight")``, the DataSource V2 connector of
  ``make spark-connector``: columns, filters, aggregates and limits pushed to the server);
* **the Python source** (``format("hudi-flight-python")``, given its ``columns`` and ``filters``
  options, the only pushdown it has);
* **``spark.read.parquet``** over the copy-on-write table's latest base files (no Hudi logic: the
  floor a Hudi reader cannot beat on its own, and no merge-on-read answer at all).

Spark's own Hudi reader (the ``hudi-spark3.5`` bundle) needs Spark 3.5, so it runs the same cases
in one session of its own, in the writer's environment (:mod:`bench.spark_hudi_job`, ``local[2]``),
before the others.

Cases: a full scan and a two-column projection of the copy-on-write table into Spark's ``noop``
sink (every row materialised), a one-partition filter (the metadata table's partition listing
prunes every other file before an endpoint exists), ``count()``, ``min``/``max`` of ``fare``
(which the Parquet footers' statistics answer), then merge-on-read ``count()`` and a snapshot
into ``noop``. Each figure is a median after a warm-up, with the Spark session's CPU seconds
(driver JVM and its Python workers) and the server's per query. Row counts agree, and the
snapshots' checksums (sums of xxhash64 over the data columns) equal Hudi's own, or the run
fails. The plan lines of the connector's scans (``explain()``) show what was pushed; ``python -m
bench.spark_scan`` prints them with the ratios. Run alone with ``python -m bench.spark_scan
[quick|full]`` or through ``python -m bench``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import ServedWarehouse, base_file_paths, measure, row
from bench.process_cpu import tree_cpu_seconds
from bench.spark_hudi import HUDI_RELEASE, SHAPES, hudi_job, hudi_written_tables
from bench.spark_hudi_job import CHECKSUM_COLUMNS, MINMAX_COLUMN, PARTITION, TWO_COLUMNS, checksum

CONNECTOR = "hudi-flight"  # the competitor the report's ratios are taken against
PYTHON_SOURCE = "hudi-flight Python source"
PARQUET = "spark.read.parquet"
HUDI_READER = "Spark Hudi reader (Spark 3.5)"
#: the partition of the selective filter (one of SHAPES' partitions)
REGION = "p00042"


@dataclass(frozen=True)
class Case:
    key: str  # the case's name in bench.spark_hudi_job
    label: str
    baseline: str  # the competitor the target is a ratio to


CASES = (
    Case("cow_scan", "COW full scan (noop sink)", PARQUET),
    Case("cow_projection", f"COW projection of {'+'.join(TWO_COLUMNS)} (noop sink)", PARQUET),
    Case("cow_filter", f"COW filter {PARTITION} = '{REGION}' (noop sink)", PARQUET),
    Case("cow_count", "COW count()", PARQUET),
    Case("cow_minmax", f"COW min/max({MINMAX_COLUMN})", PARQUET),
    Case("mor_count", "MOR count()", HUDI_READER),
    Case("mor_snapshot", "MOR snapshot (noop sink)", HUDI_READER),
)


def _spark_session() -> Any:
    """The session of the tests (the connector's jar on its classpath, built first when missing)."""
    from tests.support.spark import local_spark

    return local_spark("hudi-flight-bench-spark-scan", memory="3g")


def _jvm_pid(spark: Any) -> int:
    """The session's JVM (py4j's gateway process, a child of this one)."""
    return int(spark.sparkContext._gateway.proc.pid)


def _plan_lines(df: Any) -> list[str]:
    """The scan lines of ``df``'s physical plan: what the connector was asked for."""
    plan = df._jdf.queryExecution().executedPlan().toString()
    return [line.strip() for line in plan.splitlines() if "Scan" in line]


def _hudi_reader(cow: Path, mor: Path, repeat: int) -> dict[str, Any]:
    """Spark's Hudi reader on every case, in its own Spark 3.5 session."""
    return hudi_job("measure", "--cow", str(cow), "--mor", str(mor), "--region", REGION,
                    "--repeat", str(repeat), "--checksum", "--cases", *(c.key for c in CASES))


def run(size: str) -> list[dict]:
    from pyspark.sql import functions as F

    cow, mor = hudi_written_tables(size)
    partitions, rows = SHAPES[size]
    files = base_file_paths(cow)
    repeat = 3 if size == "full" else 5
    params = {"rows": rows, "partitions": partitions, "hudi": HUDI_RELEASE, "spark": "local[2]",
              "parquet_bytes": sum(os.path.getsize(f) for f in files), "base_files": len(files)}
    hudi = _hudi_reader(cow, mor, repeat)
    server = ServedWarehouse(cow.parent, 1)
    spark = _spark_session()
    namespace = cow.parent.name

    def connector(table: str) -> Any:
        return spark.read.format("hudi-flight").option("uri", server.uri).load(f"{namespace}.{table}")

    def python_source(table: str, **options: str) -> Any:
        reader = spark.read.format("hudi-flight-python").option("uri", server.uri)
        return reader.options(**options).load(f"{namespace}.{table}")

    def noop(df: Any) -> int:
        df.write.format("noop").mode("overwrite").save()
        return 0

    def minmax(df: Any) -> list[float]:
        found = df.agg(F.min(MINMAX_COLUMN), F.max(MINMAX_COLUMN)).first()
        return [found[0], found[1]]

    region = F.col(PARTITION) == REGION
    two = ",".join(TWO_COLUMNS)
    # case -> competitor -> the DataFrame and what to do with it
    plans: dict[str, dict[str, tuple[Callable[[], Any], Callable[[Any], Any]]]] = {
        "cow_scan": {
            CONNECTOR: (lambda: connector("cow"), noop),
            PYTHON_SOURCE: (lambda: python_source("cow"), noop),
            PARQUET: (lambda: spark.read.parquet(*files), noop),
        },
        "cow_projection": {
            CONNECTOR: (lambda: connector("cow").select(*TWO_COLUMNS), noop),
            PYTHON_SOURCE: (lambda: python_source("cow", columns=two), noop),
            PARQUET: (lambda: spark.read.parquet(*files).select(*TWO_COLUMNS), noop),
        },
        "cow_filter": {
            CONNECTOR: (lambda: connector("cow").where(region), noop),
            PYTHON_SOURCE: (lambda: python_source("cow", filters=f"{PARTITION} = '{REGION}'").where(region), noop),
            PARQUET: (lambda: spark.read.parquet(*files).where(region), noop),
        },
        "cow_count": {
            CONNECTOR: (lambda: connector("cow"), lambda df: df.count()),
            PYTHON_SOURCE: (lambda: python_source("cow"), lambda df: df.count()),
            PARQUET: (lambda: spark.read.parquet(*files), lambda df: df.count()),
        },
        "cow_minmax": {
            CONNECTOR: (lambda: connector("cow"), minmax),
            PYTHON_SOURCE: (lambda: python_source("cow", columns=MINMAX_COLUMN), minmax),
            PARQUET: (lambda: spark.read.parquet(*files), minmax),
        },
        "mor_count": {
            CONNECTOR: (lambda: connector("mor"), lambda df: df.count()),
            PYTHON_SOURCE: (lambda: python_source("mor"), lambda df: df.count()),
        },
        "mor_snapshot": {
            CONNECTOR: (lambda: connector("mor"), noop),
            PYTHON_SOURCE: (lambda: python_source("mor"), noop),
        },
    }
    out: list[dict] = []
    try:
        _check_answers(spark, connector, python_source, files, hudi, region)
        jvm = _jvm_pid(spark)
        for case in CASES:
            name = f"spark_scan/{case.label} ({partitions} partitions, {rows} rows, Hudi-written)"
            figures = hudi[case.key]
            out.append(row(name, HUDI_READER, "median wall time", figures["seconds"], "s", repeats=repeat,
                           params={**params, "baseline": case.baseline}))
            out.append(row(name, HUDI_READER, "Spark CPU per query", figures["cpu"], "s", params=params))
            for competitor, (frame, action) in plans[case.key].items():
                spark_cpu, server_cpu = tree_cpu_seconds(jvm), tree_cpu_seconds(server.process.pid)
                timing = measure(lambda frame=frame, action=action: action(frame()), repeat=repeat, warmup=1)
                spark_cpu = (tree_cpu_seconds(jvm) - spark_cpu) / (repeat + 1)
                server_cpu = (tree_cpu_seconds(server.process.pid) - server_cpu) / (repeat + 1)
                if case.key in ("cow_count", "mor_count", "cow_minmax") and timing.result != figures["value"]:
                    raise AssertionError(f"{name}: {competitor} answered {timing.result}, Hudi {figures['value']}")
                extra = {"plan": _plan_lines(frame())} if competitor == CONNECTOR else {}
                out.append(row(name, competitor, "median wall time", timing.median, "s", repeats=repeat,
                               params={**params, "baseline": case.baseline, **extra}))
                out.append(row(name, competitor, "Spark CPU per query", spark_cpu, "s", params=params))
                if competitor != PARQUET:
                    out.append(row(name, competitor, "server CPU per query", server_cpu, "s", params=params))
    finally:
        spark.stop()
        server.close()
    return out


def _check_answers(spark: Any, connector: Callable[[str], Any], python_source: Callable[..., Any],
                   files: list[str], hudi: dict[str, Any], region: Any) -> None:
    """Equal rows before anything is timed: each snapshot's checksum equals Hudi's, and the
    filter keeps the same rows through every reader."""
    for table in ("cow", "mor"):
        for who, df in ((CONNECTOR, connector(table)), (PYTHON_SOURCE, python_source(table))):
            if checksum(df) != hudi["checksum"][table]:
                raise AssertionError(f"{who}: the {table} snapshot's rows differ from Hudi's ({CHECKSUM_COLUMNS})")
    if checksum(spark.read.parquet(*files)) != hudi["checksum"]["cow"]:
        raise AssertionError("the latest base files' rows differ from Hudi's copy-on-write snapshot")
    counts = {checksum(df.where(region)) for df in (connector("cow"), python_source("cow"), spark.read.parquet(*files))}
    if len(counts) != 1:
        raise AssertionError(f"the filter {region} keeps different rows through different readers")


def report(results: list[dict]) -> str:
    """Figures, ratios to each case's baseline (baseline time / this time: above 1 is faster) and
    the connector's plan lines."""
    lines = []
    times = [r for r in results if r["metric"] == "median wall time"]
    cpu = {(r["name"], r["competitor"], r["metric"]): r["value"] for r in results if r["metric"] != "median wall time"}
    for r in times:
        base = next(b["value"] for b in times if b["name"] == r["name"] and b["competitor"] == r["params"]["baseline"])
        spark_cpu = cpu.get((r["name"], r["competitor"], "Spark CPU per query"), 0.0)
        server_cpu = cpu.get((r["name"], r["competitor"], "server CPU per query"))
        served = f", server CPU {server_cpu:6.3f} s" if server_cpu is not None else ""
        lines.append(f"{r['name'][len('spark_scan/'):]:80} {r['competitor']:30} {r['value']:8.3f} s  "
                     f"{r['params']['baseline']}/this = {base / r['value']:6.2f}  Spark CPU {spark_cpu:6.3f} s{served}")
        lines.extend(f"    {line}" for line in r["params"].get("plan", []))
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(run(sys.argv[1] if len(sys.argv) > 1 else "quick")))
