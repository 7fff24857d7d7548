"""FlightInfos of statement results (and prepared statements' dataset schemas), each schema
serialised once.

A statement's result schema carries the Flight SQL column metadata of every column (about 10 KB
of IPC for a table of 15 columns), and ``flight.FlightInfo(schema, ...)`` serialises it again on
every call: a few tens of microseconds of each GetFlightInfo, for a schema that is the very same
object execution after execution (:func:`.statements._described` keeps it). Here the schema's
wire form is kept per schema object, and a FlightInfo is built with an empty schema and then given
the kept one: a serialised protobuf message followed by another field of the same number is read
as the message with that field replaced (protobuf's merge rule for a non-repeated field), and
``google.protobuf.BytesValue`` writes a ``bytes`` field number 1, the number of
``FlightInfo.schema`` in ``Flight.proto``. The result is byte for byte the FlightInfo that
``flight.FlightInfo(schema, ...)`` builds. A prepared statement's answer carries the same wire
form as its ``dataset_schema`` (:meth:`FlightInfos.serialized`).
"""

from __future__ import annotations

from typing import Sequence

import pyarrow as pa
import pyarrow.flight as flight
from google.protobuf.wrappers_pb2 import BytesValue

from catalog.lru import BoundedLRU, CacheListener
from flight_server.server.config_sections import SqlSection

_NO_SCHEMA = pa.schema([])


class FlightInfos:
    """Builds the FlightInfos of statement results, each schema object serialised once."""

    def __init__(
        self, max_bytes: int = SqlSection.flight_info_cache_bytes, listener: CacheListener | None = None
    ):
        # by the schema object's id; the entry holds the object, so its id is not reused meanwhile
        self._kept: BoundedLRU[int, tuple[pa.Schema, bytes, bytes]] = BoundedLRU(
            "sql_wire_schemas", max_bytes, listener=listener
        )

    def info(
        self,
        schema: pa.Schema,
        descriptor: flight.FlightDescriptor,
        endpoints: Sequence[flight.FlightEndpoint],
        rows: int,
        nbytes: int,
        ordered: bool,
    ) -> flight.FlightInfo:
        """``flight.FlightInfo(schema, descriptor, endpoints, rows, nbytes, ordered=ordered)``."""
        bare = flight.FlightInfo(_NO_SCHEMA, descriptor, list(endpoints), rows, nbytes, ordered=ordered)
        return flight.FlightInfo.deserialize(bare.serialize() + self._wire(schema)[1])

    def serialized(self, schema: pa.Schema) -> bytes:
        """``schema.serialize().to_pybytes()``."""
        return self._wire(schema)[0]

    def _wire(self, schema: pa.Schema) -> tuple[bytes, bytes]:
        """``schema`` serialised, and as the serialised ``FlightInfo.schema`` field."""
        kept = self._kept.get(id(schema))
        if kept is not None and kept[0] is schema:
            return kept[1], kept[2]
        serialized = schema.serialize().to_pybytes()
        field = BytesValue(value=serialized).SerializeToString()
        self._kept.put(id(schema), (schema, serialized, field), len(serialized) + len(field))
        return serialized, field


__all__ = ["FlightInfos"]
