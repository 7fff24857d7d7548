"""How ``do_get`` writes its Arrow IPC stream: buffer compression, asked for by the client.

A client may send ``x-hudi-flight-compression: lz4`` (or ``zstd``) to get its streams with
compressed IPC buffers; without the header the stream uses the server's ``stream_compression``
(default: uncompressed, which every Flight client reads, Arrow Java without its optional
compression module included). A scan's IPC bytes shrink about threefold with lz4, which pays on
slow links; on loopback, even with TLS (whose cost is per byte), compressing and decompressing
cost about what the smaller stream saves (bench/secure_scan.py), so our client does not ask by
default (``HudiFlightClient.stream_compression``).
"""

from __future__ import annotations

import pyarrow.flight as flight
import pyarrow.ipc as ipc

from flight_server.protocol.headers import COMPRESSION_HEADER

COMPRESSION_KEY = "hudi-flight-compression"  # middleware key
CODECS = ("lz4", "zstd")


class _Requested(flight.ServerMiddleware):
    def __init__(self, options: ipc.IpcWriteOptions):
        self.options = options


class CompressionMiddlewareFactory(flight.ServerMiddlewareFactory):
    """Remembers the codec a call asked for (unknown values are ignored: the default applies)."""

    def __init__(self) -> None:
        self._options = {codec: ipc.IpcWriteOptions(compression=codec) for codec in CODECS}

    def start_call(self, info: flight.CallInfo, headers: dict[str, list[str]]) -> flight.ServerMiddleware | None:
        values = headers.get(COMPRESSION_HEADER) or []
        options = self._options.get(values[0].strip().lower()) if values else None
        return _Requested(options) if options is not None else None


def write_options(context: flight.ServerCallContext, default: ipc.IpcWriteOptions) -> ipc.IpcWriteOptions:
    """The IPC write options of this call: the client's codec, else ``default``."""
    requested = context.get_middleware(COMPRESSION_KEY)
    return requested.options if isinstance(requested, _Requested) else default


__all__ = ["CODECS", "COMPRESSION_KEY", "CompressionMiddlewareFactory", "write_options"]
