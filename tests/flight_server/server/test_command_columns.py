"""The command's ``columns`` through a plain ``pyarrow.flight`` client: dotted paths into structs
(nested column pruning) and ``[]`` (a counting scan: batches without columns, the right rows)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from catalog.format.parquet import cast_array
from catalog.hudi_table import HudiTable
from tests.support.servers import identifier, serving_tables

COW = "sample_table/cow/v6_nonpartitioned"
MOR = "sample_table/mor/parquet/v6_nonpartitioned"  # structs, log files
MOR_AVRO = "sample_table/mor/avro/v9_txns_simple_meta"  # Avro log blocks with updates and deletes


@pytest.fixture(scope="module")
def paths(fixture_table) -> dict[str, str]:
    return {identifier(name): fixture_table(name) for name in (COW, MOR, MOR_AVRO)}


@pytest.fixture(scope="module")
def client(paths, tmp_path_factory):
    with serving_tables(paths, str(tmp_path_factory.mktemp("state"))) as srv:
        with flight.connect(f"grpc://127.0.0.1:{srv.port}") as c:
            yield c


def _command(**doc) -> flight.FlightDescriptor:
    return flight.FlightDescriptor.for_command(json.dumps(doc))


def _batches(client, info) -> list[pa.RecordBatch]:
    return [batch for ep in info.endpoints for batch in client.do_get(ep.ticket).read_all().to_batches()]


@pytest.mark.parametrize("name", [COW, MOR])
def test_dotted_paths_return_the_named_struct_fields(client, paths, name):
    path = paths[identifier(name)]
    columns = ["_hoodie_record_key", "structField.child_struct.child_field2", "structField.field1"]
    descriptor = _command(table=identifier(name), columns=columns)
    info = client.get_flight_info(descriptor)
    kept = info.schema.field("structField").type
    assert info.schema.names == ["_hoodie_record_key", "structField"]
    assert [f.name for f in kept] == ["field1", "child_struct"]  # table order
    assert client.get_schema(descriptor).schema == info.schema
    got = pa.Table.from_batches(_batches(client, info), info.schema).sort_by("_hoodie_record_key")
    full = HudiTable.open(path).read(columns=["_hoodie_record_key", "structField"]).sort_by("_hoodie_record_key")
    assert got.num_rows == full.num_rows > 0
    assert got["structField"].equals(cast_array(full["structField"], kept))


def test_a_path_naming_no_field_is_invalid_and_named(client):
    for column in ("structField.nope", "structField.field1.x"):
        with pytest.raises(pa.ArrowInvalid, match=f"'{column}'"):
            client.get_flight_info(_command(table=identifier(COW), columns=["_hoodie_record_key", column]))


@pytest.mark.parametrize("name, options", [
    (COW, {}),
    (MOR, {}),
    (MOR_AVRO, {}),
    (MOR_AVRO, {"filters": [["region", "=", "us"]]}),
    (MOR_AVRO, {"query_type": "read_optimized"}),
])
def test_a_counting_scan_streams_batches_without_columns(client, paths, name, options):
    path = paths[identifier(name)]
    filters = [tuple(f) for f in options.get("filters", [])]
    expected = HudiTable.open(path).read(columns=[], **{**options, "filters": filters}).num_rows
    info = client.get_flight_info(_command(table=identifier(name), columns=[], **options))
    assert info.schema.names == []
    batches = _batches(client, info)
    assert all(b.num_columns == 0 for b in batches)
    assert sum(b.num_rows for b in batches) == expected > 0
