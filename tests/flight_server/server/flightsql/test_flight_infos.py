"""A statement's FlightInfo built from its schema's kept wire form is byte for byte the one
``flight.FlightInfo`` builds, for every schema, descriptor and endpoint shape, and each schema
object keeps its own wire form."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.server.flightsql.column_metadata import Origin, describe
from flight_server.server.flightsql.flight_infos import FlightInfos
from flight_server.server.query.queries import expiration_time

_DESCRIBED = describe(
    pa.schema([pa.field("uuid", pa.string()), pa.field("fare", pa.float64()), pa.field("ts", pa.timestamp("us"))]),
    {"uuid": Origin("hudi", "ns", "t"), "fare": Origin("hudi", "ns", "t")},
)
_ENDPOINTS = [
    flight.FlightEndpoint(b"t" * 300, [], app_metadata=b'{"rows": 3}'),
    flight.FlightEndpoint(b"u", [flight.Location.for_grpc_tcp("127.0.0.1", 8815)],
                          expiration_time=expiration_time(1_900_000_000)),
]


@pytest.mark.parametrize("schema", [_DESCRIBED, pa.schema([]), pa.schema([pa.field("n", pa.int64())])])
@pytest.mark.parametrize("ordered", [True, False])
def test_same_bytes_as_pyarrow(schema: pa.Schema, ordered: bool) -> None:
    descriptor = flight.FlightDescriptor.for_command(b"\x0a\x03abc")
    infos = FlightInfos()
    for _ in range(2):  # the second build reads the kept field
        built = infos.info(schema, descriptor, _ENDPOINTS, 3, 1234, ordered=ordered)
        expected = flight.FlightInfo(schema, descriptor, _ENDPOINTS, 3, 1234, ordered=ordered)
        assert built.serialize() == expected.serialize()
        assert built.schema.equals(schema, check_metadata=True)
        assert (built.total_records, built.total_bytes, built.ordered) == (3, 1234, ordered)
        assert [e.ticket.ticket for e in built.endpoints] == [b"t" * 300, b"u"]
        assert infos.serialized(schema) == schema.serialize().to_pybytes()


def test_each_schema_object_its_own_field() -> None:
    infos = FlightInfos()
    descriptor = flight.FlightDescriptor.for_command(b"q")
    first = pa.schema([pa.field("a", pa.int32())])
    second = pa.schema([pa.field("a", pa.int64())])  # another object, another schema
    assert infos.info(first, descriptor, [], -1, -1, ordered=True).schema == first
    assert infos.info(second, descriptor, [], -1, -1, ordered=True).schema == second
    assert infos.info(first, descriptor, [], -1, -1, ordered=True).schema == first


def test_nothing_kept_without_room() -> None:
    infos = FlightInfos(max_bytes=0)
    descriptor = flight.FlightDescriptor.for_command(b"q")
    assert infos.info(_DESCRIBED, descriptor, [], -1, -1, ordered=True).schema.equals(_DESCRIBED, check_metadata=True)
