"""The local SparkSession of the Spark tests and benchmarks (one per process: getOrCreate)."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from flight_server.client.spark import HudiFlightDataSource, HudiFlightPythonDataSource


def local_spark(
    app: str = "hudi-flight-tests", jars: str | None = None, memory: str | None = None, java_options: str | None = None
) -> SparkSession:
    """A local[2] session, UI off, UTC, loopback only, the hudi-flight data source registered (also
    as "hudi-flight-python");
    ``jars`` on ``spark.jars``, the driver's ``memory`` and JVM ``java_options`` when given."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
    )
    if jars:
        builder = builder.config("spark.jars", jars)
    if memory:
        builder = builder.config("spark.driver.memory", memory)
    if java_options:
        builder = builder.config("spark.driver.extraJavaOptions", java_options)
        builder = builder.config("spark.executor.extraJavaOptions", java_options)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(HudiFlightDataSource)
    session.dataSource.register(HudiFlightPythonDataSource)
    return session
