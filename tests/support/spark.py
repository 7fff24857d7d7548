"""The local SparkSession of the Spark tests (one per process: getOrCreate)."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from flight_server.client.spark import HudiFlightDataSource


def local_spark() -> SparkSession:
    """A local[2] session, UI off, UTC, the hudi-flight data source registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("hudi-flight-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    session.dataSource.register(HudiFlightDataSource)
    return session
