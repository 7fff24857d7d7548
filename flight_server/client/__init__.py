"""Client side: the Flight session (:mod:`.session`), the Spark source, the Polars and DuckDB
entry points and the SQL driver (over Flight SQL)."""

from flight_server.client.session import HudiFlightClient, connect

__all__ = ["HudiFlightClient", "connect"]
