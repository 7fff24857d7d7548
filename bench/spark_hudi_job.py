"""The JVM side of :mod:`bench.spark_hudi`: Hudi's own Spark writer and reader, in the writer's
virtual environment (PySpark 3.5 with Hudi's Spark bundle on ``spark.jars``).

Not a benchmark module (it has no ``run``): :mod:`bench.spark_hudi` starts it as a subprocess,
because Hudi's bundles need PySpark 3.5 while the project's own environment has PySpark 4.

    python bench/spark_hudi_job.py write   --jar BUNDLE --out DIR --partitions N --rows R
    python bench/spark_hudi_job.py measure --jar BUNDLE --cow DIR --mor DIR --key K --repeat N

``write`` makes a copy-on-write and a merge-on-read table of the same rows (a metadata table
with the record index, ``N`` partitions), then upserts a tenth of the keys into both, so the
merge-on-read table has log files to merge. ``measure`` times Spark's Hudi reader in one warm
session (after one warm-up run each) and prints a JSON object of median seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any, Callable

KEY = "uuid"
PARTITION = "region"


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


def _median_of(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    fn()  # warm-up: class loading, JIT, the session's first job
    samples, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples), result


def measure(args: argparse.Namespace) -> dict[str, Any]:
    from pyspark.sql import functions as F

    spark = _session(args.jar)
    reader = spark.read.format("hudi").option("hoodie.metadata.enable", "true")

    def plan(path: str) -> int:
        return len(reader.load(path).inputFiles())

    def scan(path: str) -> int:
        df = reader.load(path)
        df.write.format("noop").mode("overwrite").save()
        return 0

    def count(path: str) -> int:
        return reader.load(path).count()

    def point(path: str) -> int:
        df = (
            reader.option("hoodie.enable.data.skipping", "true")
            .option("hoodie.metadata.record.index.enable", "true")
            .load(path)
        )
        return len(df.filter(F.col(KEY) == args.key).collect())

    result: dict[str, Any] = {}
    for name, fn, path in (
        ("planning_mor", plan, args.mor),
        ("cow_scan", scan, args.cow),
        ("mor_snapshot", scan, args.mor),
        ("mor_count", count, args.mor),
        ("point_query", point, args.mor),
    ):
        seconds, value = _median_of(lambda fn=fn, path=path: fn(path), args.repeat)
        result[name] = {"seconds": seconds, "value": value}
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
    m.add_argument("--key", required=True)
    m.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    result = write(args) if args.command == "write" else measure(args)
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
