"""How ``do_get`` writes its Arrow IPC stream: buffer compression, only for a client that asks.

A client may send ``x-hudi-flight-compression: lz4`` (or ``zstd``) to get its streams with
compressed IPC buffers; a client that asks with another value (``yes``, a codec Arrow IPC does not
have) gets the server's ``stream_compression`` if one is set. A client that does not ask always
gets uncompressed buffers: not every Flight client can decompress (the Arrow Flight SQL JDBC
driver cannot). A scan's IPC bytes shrink about threefold with lz4, which pays on slow links; on
loopback, even with TLS (whose cost is per byte), compressing and decompressing cost about what
the smaller stream saves (bench/secure_scan.py), so our client does not ask by default
(``HudiFlightClient.stream_compression``).
"""

from __future__ import annotations

import pyarrow.flight as flight
import pyarrow.ipc as ipc

from flight_server.protocol.headers import COMPRESSION_HEADER

COMPRESSION_KEY = "hudi-flight-compression"  # middleware key
CODECS = ("lz4", "zstd")
_UNCOMPRESSED = ipc.IpcWriteOptions()


class _Requested(flight.ServerMiddleware):
    """A call that asked for compression: the codec it named (``None``: none the server knows)."""

    def __init__(self, options: ipc.IpcWriteOptions | None):
        self.options = options


class CompressionMiddlewareFactory(flight.ServerMiddlewareFactory):
    """Remembers whether a call asked for compression, and with which codec."""

    def __init__(self) -> None:
        self._options = {codec: ipc.IpcWriteOptions(compression=codec) for codec in CODECS}

    def start_call(self, info: flight.CallInfo, headers: dict[str, list[str]]) -> flight.ServerMiddleware | None:
        values = headers.get(COMPRESSION_HEADER) or []
        if not values or not values[0].strip():
            return None
        return _Requested(self._options.get(values[0].strip().lower()))


def write_options(context: flight.ServerCallContext, default: ipc.IpcWriteOptions) -> ipc.IpcWriteOptions:
    """The IPC write options of this call: the codec it asked for; ``default`` (the server's
    ``stream_compression``) when it asked without naming one the server knows; else uncompressed."""
    requested = context.get_middleware(COMPRESSION_KEY)
    if not isinstance(requested, _Requested):
        return _UNCOMPRESSED
    return requested.options if requested.options is not None else default


__all__ = ["CODECS", "COMPRESSION_KEY", "CompressionMiddlewareFactory", "write_options"]
