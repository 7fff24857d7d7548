"""gRPC headers of our own, shared by the server and the Python client."""

from __future__ import annotations

#: a client asks for IPC buffer compression of its do_get streams ("lz4" or "zstd")
COMPRESSION_HEADER = "x-hudi-flight-compression"

__all__ = ["COMPRESSION_HEADER"]
