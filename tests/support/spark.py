"""The local SparkSession of the Spark tests and benchmarks (one per process: getOrCreate), with the
DataSource V2 connector's jar on its classpath, so ``format("hudi-flight")`` is the connector and
``format("hudi-flight-python")`` the Python data source."""

from __future__ import annotations

import functools
import os
import sys
from typing import Callable, TypeVar

from pyspark.sql import SparkSession

from flight_server.client.spark import HudiFlightPythonDataSource
from flight_server.spark import BUILD_COMMAND, connector_jar
from tests.support.make import run_make


@functools.lru_cache(maxsize=1)
def built_connector_jar() -> str:
    """The connector's jar, built first by ``make spark-connector`` (nothing to do when it is newer
    than its sources; :func:`~tests.support.make.run_make` keeps parallel test workers from building
    it twice at once). A build that fails (no Maven, no JDK) fails the caller: ``make test`` builds
    it before the tests."""
    done = run_make(BUILD_COMMAND.split()[1])
    if done.returncode != 0:
        raise RuntimeError(f"{BUILD_COMMAND} failed: {(done.stderr or done.stdout)[-2000:]}")
    return connector_jar()


T = TypeVar("T")
#: Spark's words when a Python worker it started (a streaming source's runner: a fresh interpreter,
#: not a fork of the daemon) did not connect back within 10 s, a bound Spark 4 fixes in code (no
#: setting): on a loaded machine the interpreter's imports alone can take longer
WORKER_DID_NOT_CONNECT = ("Python worker failed to connect back", "waiting for the Python worker to connect back")


def local_spark(
    app: str = "hudi-flight-tests", jars: str | None = None, memory: str | None = None, java_options: str | None = None
) -> SparkSession:
    """A local[2] session, UI off, UTC, loopback only, the connector's jar and ``jars`` on
    ``spark.jars``, the Python data source registered as "hudi-flight-python"; the driver's
    ``memory`` and JVM ``java_options`` when given."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.jars", ",".join([built_connector_jar(), *([jars] if jars else [])]))
    )
    if memory:
        builder = builder.config("spark.driver.memory", memory)
    if java_options:
        builder = builder.config("spark.driver.extraJavaOptions", java_options)
        builder = builder.config("spark.executor.extraJavaOptions", java_options)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(HudiFlightPythonDataSource)
    return session


def retried_on_worker_start(run: Callable[[int], T], attempts: int = 3) -> T:
    """``run(attempt)``, again (at most ``attempts`` times) when it failed only because a Python
    worker missed Spark's fixed connect-back bound (:data:`WORKER_DID_NOT_CONNECT`); any other
    failure is raised at once. ``attempt`` lets a run use fresh names (a checkpoint folder)."""
    for attempt in range(attempts):
        try:
            return run(attempt)
        except Exception as err:  # noqa: BLE001 - Py4J and streaming errors have no common class
            if attempt + 1 == attempts or not any(words in str(err) for words in WORKER_DID_NOT_CONNECT):
                raise
    raise AssertionError("unreachable")
