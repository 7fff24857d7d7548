"""gRPC headers of our own, shared by the server and the Python client."""

from __future__ import annotations

#: a client asks for IPC buffer compression of its do_get streams ("lz4" or "zstd")
COMPRESSION_HEADER = "x-hudi-flight-compression"

#: a Flight SQL client that reads every endpoint of a FlightInfo says so ("true"), and a plain
#: table scan is then answered with one endpoint per weighted split; without it (or a user-agent
#: the server knows, see ``flightsql.single_endpoint``) every statement result is one endpoint.
#: The JDBC driver sends unknown URL parameters as headers: ``...&x-hudi-flight-all-endpoints=true``
ALL_ENDPOINTS_HEADER = "x-hudi-flight-all-endpoints"

#: a client asks for every statement result in one endpoint ("true"), even one the server knows
#: reads them all
SINGLE_ENDPOINT_HEADER = "x-hudi-flight-single-endpoint"

__all__ = ["ALL_ENDPOINTS_HEADER", "COMPRESSION_HEADER", "SINGLE_ENDPOINT_HEADER"]
