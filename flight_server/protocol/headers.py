"""gRPC headers of our own, shared by the server and the Python client."""

from __future__ import annotations

#: a client asks for IPC buffer compression of its do_get streams ("lz4" or "zstd")
COMPRESSION_HEADER = "x-hudi-flight-compression"

#: a Flight SQL client that reads only the first endpoint of a FlightInfo asks for every statement
#: result in one endpoint ("true"; the JDBC driver sends unknown URL parameters as headers)
SINGLE_ENDPOINT_HEADER = "x-hudi-flight-single-endpoint"

__all__ = ["COMPRESSION_HEADER", "SINGLE_ENDPOINT_HEADER"]
