"""The library and the Flight service run the same planner and the same split reader: a query
planned through Flight has exactly the library's splits, and each endpoint streams exactly the
rows that ``read_split`` gives for that split."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from catalog import HudiTable, ReadOptions
from catalog.plan.planner import plan
from catalog.plan.splits import SplitOptions
from catalog.read.split_reader import read_split
from flight_server.server.config import ServerConfig
from flight_server.server.registry import Registry
from hudi_generator.generator import COPY_ON_WRITE, MERGE_ON_READ, GeneratorSpec
from tests.support.compare import assert_same_rows
from tests.support.servers import running_server

SPLIT_BYTES = 64 * 1024


def _key(file_id: str, row_groups) -> tuple:
    return (file_id, tuple(row_groups) if row_groups is not None else None)


@pytest.mark.parametrize("table_type", [COPY_ON_WRITE, MERGE_ON_READ])
def test_service_endpoints_are_the_library_splits(generated_table, tmp_path, table_type):
    spec = GeneratorSpec(rows=20_000, partitions=2, row_group_size=1_000, commits=2, table_type=table_type,
                         update_fraction=0.1, workers=1)
    path = generated_table(spec)
    options = ReadOptions(columns=["uuid", "fare", "_hoodie_commit_time"], filters=[("fare", ">", 100.0)])
    table = HudiTable.open(path)
    scan = plan(table.state, options, SplitOptions(target_split_bytes=SPLIT_BYTES))
    library = {_key(s.file_slice.file_id, s.row_groups): read_split(scan.context, s) for s in scan.splits}
    assert len(library) >= 2

    registry = Registry("sqlite://")
    registry.register_table("gen.t", path)
    config = ServerConfig(port=0, state_dir=str(tmp_path / "state"), target_split_bytes=SPLIT_BYTES)
    with running_server(config, registry=registry) as server:
        client = flight.connect(f"grpc://127.0.0.1:{server.port}")
        command = json.dumps({"table": "gen.t", **options.to_json()}).encode()
        info = client.get_flight_info(flight.FlightDescriptor.for_command(command))
        served = {}
        for endpoint in info.endpoints:
            meta = json.loads(endpoint.app_metadata)
            served[_key(meta["file_ids"][0], meta.get("row_groups"))] = client.do_get(endpoint.ticket).read_all()
        client.close()
    assert sorted(served, key=repr) == sorted(library, key=repr)
    for key, batches in library.items():
        expected = pa.Table.from_batches(list(batches), schema=scan.schema)
        assert_same_rows(served[key], expected, str(key), exact_types=True)
