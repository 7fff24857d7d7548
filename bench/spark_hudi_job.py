"""The JVM side of :mod:`bench.spark_hudi`: Hudi's own Spark writer and reader, in the writer's
virtual environment (PySpark 3.5 with Hudi's Spark bundle on ``spark.jars``).

Not a benchmark module (it has no ``run``): :mod:`bench.spark_hudi` starts it as a subprocess,
because Hudi's bundles need PySpark 3.5 while the project's own environment has PySpark 4.

    python bench/spark_hudi_job.py write   --jar BUNDLE --out DIR --partitions N --rows R
    python bench/spark_hudi_job.py measure --jar BUNDLE --cow DIR --mor DIR --key K --repeat N \
        [--region P] [--cases NAME ...] [--checksum]

``write`` makes a copy-on-write and a merge-on-read table of the same rows (a metadata table
with the record index, ``N`` partitions), then upserts a tenth of the keys into both, so the
merge-on-read table has log files to merge. ``measure`` times Spark's Hudi reader in one warm
session (after one warm-up run each) and prints a JSON object of median seconds, each case's
result and the session's CPU seconds per call (the driver's Python, its JVM and the JVM's
children). ``--cases`` picks the cases (default: those of :mod:`bench.spark_hudi`); with
``--checksum`` the result also holds, untimed, a checksum of each table's snapshot rows
(:data:`CHECKSUM_COLUMNS`), which other readers compute the same way to show equal rows.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any, Callable

from bench.process_cpu import tree_cpu_seconds  # the job runs with the repository on PYTHONPATH

KEY = "uuid"
PARTITION = "region"
#: the columns of the two-column projection
TWO_COLUMNS = ("fare", "rider")
#: the column whose min and max are asked for
MINMAX_COLUMN = "fare"
#: the snapshot checksum: sum of xxhash64 over these columns (Spark's xxhash64 is the same on 3.5 and 4)
CHECKSUM_COLUMNS = (KEY, PARTITION, "rider", "fare", "distance", "ts")
#: the cases ``measure`` times when ``--cases`` is not given
DEFAULT_CASES = ("planning_mor", "cow_scan", "mor_snapshot", "mor_count", "point_query")


def _session(jar: str) -> Any:
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("hudi-flight-bench-jvm-peer")
        .config("spark.jars", jar)
        .config("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
        .config("spark.sql.extensions", "org.apache.spark.sql.hudi.HoodieSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.hudi.catalog.HoodieCatalog")
        .config("spark.kryo.registrator", "org.apache.spark.HoodieSparkKryoRegistrar")
        .config("spark.driver.memory", "3g")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _writer_options(table_type: str, name: str) -> dict[str, str]:
    return {
        "hoodie.table.name": name,
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.datasource.write.recordkey.field": KEY,
        "hoodie.datasource.write.partitionpath.field": PARTITION,
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.metadata.enable": "true",
        "hoodie.metadata.record.index.enable": "true",
        "hoodie.metadata.record.index.min.filegroup.count": "2",
        "hoodie.embed.timeline.server": "false",
        "hoodie.upsert.shuffle.parallelism": "4",
        "hoodie.insert.shuffle.parallelism": "4",
        "hoodie.bulkinsert.shuffle.parallelism": "4",
        "hoodie.bulkinsert.sort.mode": "GLOBAL_SORT",  # one file per partition, not one per task
        "hoodie.compact.inline": "false",
    }


def _rows(spark: Any, rows: int, partitions: int, version: int, fraction: float = 1.0) -> Any:
    from pyspark.sql import functions as F

    every = max(1, round(1 / fraction))
    df = spark.range(0, rows, every, numPartitions=4)
    return df.select(
        F.format_string("key-%09d", F.col("id")).alias(KEY),
        F.format_string("p%05d", F.col("id") % partitions).alias(PARTITION),
        F.format_string("rider-%03d", F.col("id") % 997).alias("rider"),
        F.format_string("driver-%03d", F.col("id") % 991).alias("driver"),
        ((F.col("id") * 37 % 10_000) / 100.0 + version).alias("fare"),
        (F.col("id") % 1000).cast("int").alias("distance"),
        (F.lit(1_700_000_000_000) + F.col("id") + version).alias("ts"),
    )


def write(args: argparse.Namespace) -> dict[str, Any]:
    spark = _session(args.jar)
    out: dict[str, Any] = {}
    for table_type, folder in (("COPY_ON_WRITE", "cow"), ("MERGE_ON_READ", "mor")):
        path = os.path.join(args.out, folder)
        options = _writer_options(table_type, f"bench_{folder}")
        t0 = time.perf_counter()
        _rows(spark, args.rows, args.partitions, 0).write.format("hudi").options(**options).option(
            "hoodie.datasource.write.operation", "bulk_insert"
        ).mode("overwrite").save(path)
        _rows(spark, args.rows, args.partitions, 1, fraction=0.1).write.format("hudi").options(**options).option(
            "hoodie.datasource.write.operation", "upsert"
        ).mode("append").save(path)
        out[folder] = {"path": path, "write_seconds": time.perf_counter() - t0}
    spark.stop()
    return out


def _median_of(fn: Callable[[], Any], repeat: int) -> dict[str, Any]:
    fn()  # warm-up: class loading, JIT, the session's first job
    samples, result = [], None
    cpu = tree_cpu_seconds(os.getpid())
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - t0)
    return {"seconds": statistics.median(samples), "value": result, "cpu": (tree_cpu_seconds(os.getpid()) - cpu) / repeat}


def checksum(df: Any) -> int:
    """Order-independent checksum of a DataFrame's rows over :data:`CHECKSUM_COLUMNS`."""
    from pyspark.sql import functions as F

    hashes = df.select(F.xxhash64(*CHECKSUM_COLUMNS).cast("decimal(38,0)").alias("h"))
    return int(hashes.agg(F.sum("h")).first()[0] or 0)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    from pyspark.sql import functions as F

    spark = _session(args.jar)
    reader = spark.read.format("hudi").option("hoodie.metadata.enable", "true")

    def noop(df: Any) -> int:
        df.write.format("noop").mode("overwrite").save()
        return 0

    def point(path: str) -> int:
        df = (
            reader.option("hoodie.enable.data.skipping", "true")
            .option("hoodie.metadata.record.index.enable", "true")
            .load(path)
        )
        return len(df.filter(F.col(KEY) == args.key).collect())

    def minmax(path: str) -> list[float]:
        found = reader.load(path).agg(F.min(MINMAX_COLUMN), F.max(MINMAX_COLUMN)).first()
        return [found[0], found[1]]

    cases: dict[str, Callable[[], Any]] = {
        "planning_mor": lambda: len(reader.load(args.mor).inputFiles()),
        "cow_scan": lambda: noop(reader.load(args.cow)),
        "cow_projection": lambda: noop(reader.load(args.cow).select(*TWO_COLUMNS)),
        "cow_filter": lambda: noop(reader.load(args.cow).where(F.col(PARTITION) == args.region)),
        "cow_count": lambda: reader.load(args.cow).count(),
        "cow_minmax": lambda: minmax(args.cow),
        "mor_snapshot": lambda: noop(reader.load(args.mor)),
        "mor_count": lambda: reader.load(args.mor).count(),
        "point_query": lambda: point(args.mor),
    }
    unknown = sorted(set(args.cases) - set(cases))
    if unknown:
        raise SystemExit(f"unknown cases {unknown}; known: {sorted(cases)}")
    result: dict[str, Any] = {name: _median_of(cases[name], args.repeat) for name in args.cases}
    if args.checksum:
        result["checksum"] = {"cow": checksum(reader.load(args.cow)), "mor": checksum(reader.load(args.mor))}
    spark.stop()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write")
    w.add_argument("--jar", required=True)
    w.add_argument("--out", required=True)
    w.add_argument("--partitions", type=int, required=True)
    w.add_argument("--rows", type=int, required=True)
    m = sub.add_parser("measure")
    m.add_argument("--jar", required=True)
    m.add_argument("--cow", required=True)
    m.add_argument("--mor", required=True)
    m.add_argument("--key", help="the record key of the case point_query")
    m.add_argument("--repeat", type=int, default=3)
    m.add_argument("--region", default="p00000", help="the partition of the case cow_filter")
    m.add_argument("--cases", nargs="+", default=list(DEFAULT_CASES))
    m.add_argument("--checksum", action="store_true")
    args = parser.parse_args(argv)
    result = write(args) if args.command == "write" else measure(args)
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
