"""Public Spark entry points (docs/spark.md): the DataSource V2 connector's jar and Spark catalog
class, and the PySpark data source (:mod:`flight_server.client.spark`, for sessions that cannot
load a jar).

::

    from flight_server.spark import CATALOG_CLASS, connector_jar
    spark = (SparkSession.builder.config("spark.jars", connector_jar())
             .config("spark.sql.catalog.lake", CATALOG_CLASS)
             .config("spark.sql.catalog.lake.uri", "grpc://host:8815").getOrCreate())

The jar is package data (``flight_server/jars/``): ``make spark-connector`` builds it from the
repository's Java sources with Maven and puts it there, and a wheel built after it (``make wheel``)
carries it. Nothing here needs PySpark but the data source itself.
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING, Any

from catalog.optional import NotInstalledError

if TYPE_CHECKING:
    from flight_server.client.spark import HudiFlightDataSource, HudiFlightPythonDataSource

#: the connector's Spark catalog (``spark.sql.catalog.NAME``; docs/spark.md)
CATALOG_CLASS = "dev.hudiflight.spark.HudiFlightCatalog"
#: the connector's jar, in the package's ``jars`` folder
CONNECTOR_JAR = "hudi-flight-spark-connector.jar"
#: the command that builds it in a checkout of the repository
BUILD_COMMAND = "make spark-connector"
_DATA_SOURCES = ("HudiFlightDataSource", "HudiFlightPythonDataSource")


def connector_jar() -> str:
    """The path of the DataSource V2 connector's jar, for ``spark.jars``.

    Raises:
        NotInstalledError: the jar was not built into this installation (the message names the
            command that builds it).
    """
    jar = resources.files("flight_server").joinpath("jars", CONNECTOR_JAR)
    if not jar.is_file():
        raise NotInstalledError(
            f"the hudi-flight Spark connector's jar ({CONNECTOR_JAR}) is not built into this installation: "
            f"run `{BUILD_COMMAND}` in a checkout of hudi-flight (Maven and a JDK 17+), or install a wheel "
            "built after it (docs/spark.md)",
            name=CONNECTOR_JAR,
        )
    return str(jar)


def __getattr__(name: str) -> Any:
    """The PySpark data source classes, imported when asked for (they need the ``spark`` extra)."""
    if name in _DATA_SOURCES:
        from flight_server.client import spark

        return getattr(spark, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["BUILD_COMMAND", "CATALOG_CLASS", "CONNECTOR_JAR", "HudiFlightDataSource", "HudiFlightPythonDataSource",
           "connector_jar"]
