"""Public path of the PySpark data source (docs/spark.md); see :mod:`flight_server.client.spark`."""

from flight_server.client.spark import HudiFlightDataSource

__all__ = ["HudiFlightDataSource"]
