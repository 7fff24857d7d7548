"""Public path of the PySpark data source (interfaces.md section 4); see :mod:`flight_server.client.spark`."""

from flight_server.client.spark import HudiFlightDataSource

__all__ = ["HudiFlightDataSource"]
