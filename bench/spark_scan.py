"""Spark through hudi-flight vs Spark's own Parquet reader, on the same copy-on-write table.

The table and the server are those of :mod:`bench.flight_scan` (the generated ``bench.trips``
table, ``hudi-flight serve`` in a subprocess). One local SparkSession (``local[2]``) runs:

* ``count()``: ``spark.read.format("hudi-flight-python")`` (every column crosses Flight and the Python
  worker: Python sources get no column pruning), the same with ``columns`` set to one column,
  and ``spark.read.parquet`` over the table's latest base files (answered from footers);
* a full scan of two columns (``fare``, ``rider``) into Spark's ``noop`` sink, so every row
  is materialised: hudi-flight with the ``columns`` option vs ``spark.read.parquet().select``;
* ``count()`` through Spark's JDBC source and the Arrow Flight SQL JDBC driver (``make
  jdbc-driver``), reading the table through a subquery Spark's generic dialect can type
  (``tests.support.spark_jdbc.readable_dbtable``): Spark asks for ``SELECT 1 FROM (subquery)``
  (the server reads one column), or with ``pushDownAggregate`` for ``SELECT COUNT(*) FROM
  (subquery)`` (answered from the Parquet footers: no column moves), beside the Python data
  source, which moves every column.

The ratio reported is Parquet time / hudi-flight time (>= 0.5 is the target).
Run alone with ``python -m bench.spark_scan [quick|full]`` or through ``python -m bench``.
"""

from __future__ import annotations

import os
import sys
from typing import Callable

from bench.common import ServedWarehouse, base_file_paths, measure, row
from bench.flight_scan import _table
from tests.support.jdbc import fetch_driver
from tests.support.spark_jdbc import DRIVER_CLASS, JVM_OPTIONS, jdbc_url, readable_dbtable

TWO_COLUMNS = ["fare", "rider"]


def _spark_session(jdbc_jar: str):
    from tests.support.spark import local_spark

    return local_spark("hudi-flight-bench", jdbc_jar, "2g", JVM_OPTIONS)


def run(size: str) -> list[dict]:
    from catalog import HudiTable

    path = _table(size)
    table = HudiTable.open(str(path))
    files = base_file_paths(path)
    rows = table.read(columns=["_hoodie_record_key"]).num_rows
    nbytes = sum(os.path.getsize(f) for f in files)
    params = {"rows": rows, "parquet_bytes": nbytes, "files": len(files), "spark": "local[2]"}
    repeat = 3 if size == "full" else 5
    server = ServedWarehouse(path.parent.parent, 1)
    spark = _spark_session(str(fetch_driver()))
    out: list[dict] = []

    from flight_server.client.spark import PYTHON_SOURCE_NAME

    def flight(columns: list[str] | None = None):
        reader = spark.read.format(PYTHON_SOURCE_NAME).option("uri", server.uri)
        if columns:
            reader = reader.option("columns", ",".join(columns))
        return reader.load("bench.trips")

    def jdbc(**options: str):
        dbtable = readable_dbtable(flight().schema, "bench.trips")
        return spark.read.format("jdbc").options(
            url=jdbc_url(server.uri, all_endpoints=True), dbtable=dbtable, driver=DRIVER_CLASS, **options).load()

    def scan(df) -> None:
        df.write.format("noop").mode("overwrite").save()

    def timed(name: str, competitor: str, fn: Callable[[], object], check: bool = True) -> float:
        t = measure(fn, repeat=repeat, warmup=1)
        if check and t.result != rows:
            raise AssertionError(f"{competitor}: {t.result} rows, expected {rows}")
        out.append(row(name, competitor, "median wall time", t.median, "s", repeats=t.repeats, params=params))
        out.append(row(name, competitor, "throughput", rows / t.median, "rows/s", params=params))
        return t.median

    try:
        count = f"spark_scan/count {rows} rows"
        timed(count, "spark.read.parquet", lambda: spark.read.parquet(*files).count())
        timed(count, "hudi-flight", lambda: flight().count())
        timed(count, "hudi-flight (columns=uuid)", lambda: flight(["uuid"]).count())
        timed(count, "Spark JDBC (Flight SQL driver)", lambda: jdbc().count())
        timed(count, "Spark JDBC, pushDownAggregate", lambda: jdbc(pushDownAggregate="true").count())
        two = f"spark_scan/full scan of {'+'.join(TWO_COLUMNS)}"
        timed(two, "spark.read.parquet", lambda: scan(spark.read.parquet(*files).select(*TWO_COLUMNS)), check=False)
        timed(two, "hudi-flight", lambda: scan(flight(TWO_COLUMNS)), check=False)
    finally:
        spark.stop()
        server.close()
    return out


if __name__ == "__main__":
    results = run(sys.argv[1] if len(sys.argv) > 1 else "quick")
    times = {(r["name"], r["competitor"]): r["value"] for r in results if r["metric"] == "median wall time"}
    for (name, competitor), seconds in times.items():
        baseline = times[(name, "spark.read.parquet")]
        print(f"{name:45} {competitor:28} {seconds:8.3f} s   parquet/this = {baseline / seconds:5.2f}")
