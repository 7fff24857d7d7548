"""Spark's JDBC source over the Arrow Flight SQL JDBC driver, by table name.

Spark's generic JDBC mapping refuses the types the driver reports for zoned timestamps, structs,
maps and lists (UNRECOGNIZED_SQL_TYPE) and types every ``BIGINT``, counts included,
``decimal(20,0)`` (the driver reports no column as signed). The project ships a Spark
``JdbcDialect`` for ``jdbc:arrow-flight-sql:`` URLs (``jdbc-dialect/``, built by
``make spark-dialect``); with its jar on ``spark.jars`` next to the driver's::

    from flight_server.client.spark_jdbc import register_jdbc_dialect
    register_jdbc_dialect(spark)
    df = spark.read.jdbc("jdbc:arrow-flight-sql://host:8815/?useEncryption=false", "ns.t",
                         properties={"driver": "org.apache.arrow.driver.jdbc.ArrowFlightJdbcDriver"})

A JVM dialect cannot be written in Python; this only registers the compiled one in the Spark
driver's JVM (the driver decides the schema; executors read each column by its Spark type).
"""

from __future__ import annotations

from typing import Any

DIALECT_CLASS = "hudiflight.spark.HudiFlightJdbcDialect"
DRIVER_CLASS = "org.apache.arrow.driver.jdbc.ArrowFlightJdbcDriver"


def register_jdbc_dialect(spark: Any) -> None:
    """Register the dialect with Spark's ``JdbcDialects`` in the JVM of ``spark`` (a classic
    SparkSession: Spark Connect has no JVM on the client).

    Raises:
        RuntimeError: no JVM behind the session, or the dialect's jar is not on ``spark.jars``.
    """
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        raise RuntimeError("register_jdbc_dialect needs a classic SparkSession (Spark Connect has no JVM here)")
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    try:
        dialect_class = jvm.java.lang.Class.forName(DIALECT_CLASS, True, loader)
    except Exception as err:  # py4j's error of a missing class
        raise RuntimeError(
            f"{DIALECT_CLASS} is not on the Spark classpath: add the jar `make spark-dialect` builds "
            "(.cache/jdbc/hudi-flight-spark-dialect.jar) to spark.jars"
        ) from err
    jvm.org.apache.spark.sql.jdbc.JdbcDialects.registerDialect(dialect_class.newInstance())


__all__ = ["DIALECT_CLASS", "DRIVER_CLASS", "register_jdbc_dialect"]
