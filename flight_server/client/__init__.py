"""Client side: the Flight session (:mod:`.session`), the Spark source and the SQL driver."""

from flight_server.client.session import HudiFlightClient, connect

__all__ = ["HudiFlightClient", "connect"]
