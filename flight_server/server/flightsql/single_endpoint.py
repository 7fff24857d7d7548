"""Which Flight SQL calls get their statement result in one endpoint.

Many Flight SQL clients read only the first endpoint of a FlightInfo (flightsql-dbapi, hand-written
``do_get(info.endpoints[0].ticket)`` loops, some BI connectors): given one endpoint per weighted
split they would return a part of the rows without an error. So a statement result is one endpoint
unless the call shows that its client reads them all:

- the header ``x-hudi-flight-all-endpoints: true`` (our Python client sends it on every call; the
  JDBC driver sends it when it is a URL parameter);
- or a ``user-agent`` the server knows reads every endpoint: the ADBC Flight SQL driver's
  (``ADBC Flight SQL Driver/<version> grpc-go/...``). The JDBC driver's is grpc-java's own
  (``grpc-java-netty/<version>``), the same as any Java Flight client's, some of which read only the
  first endpoint: it is not recognised.

``x-hudi-flight-single-endpoint: true`` asks for one endpoint whatever the rest says.
"""

from __future__ import annotations

import pyarrow.flight as flight

from flight_server.protocol.headers import ALL_ENDPOINTS_HEADER, SINGLE_ENDPOINT_HEADER

SINGLE_ENDPOINT_KEY = "hudi-flight-endpoints"  # middleware key
#: user-agent prefixes of clients known to read every endpoint of a FlightInfo
ALL_ENDPOINT_AGENTS = ("ADBC Flight SQL Driver",)
_YES = ("1", "true", "yes", "on")


class _ReadsAll(flight.ServerMiddleware):
    """Present on a call whose client reads every endpoint."""


def _says_yes(headers: dict[str, list[str]], name: str) -> bool:
    values = headers.get(name) or []
    return bool(values) and values[0].strip().lower() in _YES


def reads_all_endpoints(headers: dict[str, list[str]]) -> bool:
    """Whether the client sending ``headers`` reads every endpoint of a FlightInfo."""
    if _says_yes(headers, SINGLE_ENDPOINT_HEADER):
        return False
    if _says_yes(headers, ALL_ENDPOINTS_HEADER):
        return True
    agent = (headers.get("user-agent") or [""])[0]
    return agent.startswith(ALL_ENDPOINT_AGENTS)


class SingleEndpointMiddlewareFactory(flight.ServerMiddlewareFactory):
    """Notes the calls whose client reads every endpoint (every other call: one endpoint)."""

    def start_call(self, info: flight.CallInfo, headers: dict[str, list[str]]) -> flight.ServerMiddleware | None:
        return _ReadsAll() if reads_all_endpoints(headers) else None


def single_endpoint(context: flight.ServerCallContext) -> bool:
    """Whether this call's statement result must be one endpoint."""
    return not isinstance(context.get_middleware(SINGLE_ENDPOINT_KEY), _ReadsAll)


__all__ = ["ALL_ENDPOINT_AGENTS", "SINGLE_ENDPOINT_KEY", "SingleEndpointMiddlewareFactory", "reads_all_endpoints",
           "single_endpoint"]
