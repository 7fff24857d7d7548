"""The ``x-hudi-flight-single-endpoint`` header: a Flight SQL client that reads only the first
endpoint of a FlightInfo (flightsql-dbapi, some BI connectors) asks for every statement result in
one endpoint, so it gets all rows. Without it a plain table scan is answered with one endpoint per
weighted split, which parallel clients (ADBC, JDBC, ours) fetch at once."""

from __future__ import annotations

import pyarrow.flight as flight

from flight_server.protocol.headers import SINGLE_ENDPOINT_HEADER

SINGLE_ENDPOINT_KEY = "hudi-flight-single-endpoint"  # middleware key
_YES = ("1", "true", "yes", "on")


class _Asked(flight.ServerMiddleware):
    """Present on a call that asked for one endpoint."""


class SingleEndpointMiddlewareFactory(flight.ServerMiddlewareFactory):
    """Notes the calls whose header asks for one endpoint (other values: the default applies)."""

    def start_call(self, info: flight.CallInfo, headers: dict[str, list[str]]) -> flight.ServerMiddleware | None:
        values = headers.get(SINGLE_ENDPOINT_HEADER) or []
        return _Asked() if values and values[0].strip().lower() in _YES else None


def single_endpoint(context: flight.ServerCallContext) -> bool:
    """Whether this call asked for its result in one endpoint."""
    return isinstance(context.get_middleware(SINGLE_ENDPOINT_KEY), _Asked)


__all__ = ["SINGLE_ENDPOINT_KEY", "SingleEndpointMiddlewareFactory", "single_endpoint"]
