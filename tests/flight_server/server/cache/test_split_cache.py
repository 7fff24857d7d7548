"""Split results and storage faults through a real server.

* the split result cache answers a repeated ticket without storage requests, keeps only what
  fits its bounds, and its rows equal a fresh read;
* a storage request that keeps failing reaches the client as UNAVAILABLE naming the file, with
  no traceback; a transient failure is retried and the query answers.
"""

from __future__ import annotations

import pyarrow.flight as flight
import pytest

from catalog import storage as storage_module
from catalog.hudi_table import HudiTable
from flight_server.server.config import ServerConfig
from flight_server.server.registry import Registry
from hudi_generator.generator import MERGE_ON_READ, GeneratorSpec
from tests.support.compare import assert_same_rows
from tests.support.counting_fs import CountingFileSystem, FlakyFileSystem, register
from tests.support.servers import running_server

SPEC = GeneratorSpec(rows=400, partitions=2, commits=2, table_type=MERGE_ON_READ)


@pytest.fixture(scope="module")
def table(generated_table):
    return generated_table(SPEC)


def _serve(tmp_path, uri: str, **settings):
    register()
    registry = Registry(f"sqlite:///{tmp_path / 'catalog.db'}")
    registry.register_table("t.trips", uri)
    config = ServerConfig(port=0, state_dir=str(tmp_path / "state"), refresh_interval_seconds=0, **settings)
    return running_server(config, registry=registry)


def _read(client, info):
    return [client.do_get(ep.ticket).read_all() for ep in info.endpoints]


def test_a_repeated_ticket_is_answered_from_the_split_cache(table, tmp_path):
    with _serve(tmp_path, f"countfs://{table}", split_cache_bytes=64 << 20) as server:
        client = flight.connect(f"grpc://127.0.0.1:{server.port}")
        info = client.get_flight_info(flight.FlightDescriptor.for_path("t", "trips"))
        first = _read(client, info)
        CountingFileSystem.reset()
        again = _read(client, info)
        assert CountingFileSystem.reset() == []
        assert all(a.equals(b) for a, b in zip(first, again))
        import pyarrow as pa

        assert_same_rows(pa.concat_tables(again), HudiTable.open(table).read(), exact_types=True)
        stats = server.app.split_results.stats()
        assert stats.hits == len(info.endpoints) and stats.misses == len(info.endpoints)
        assert 0 < stats.bytes <= 64 << 20
        client.close()


def test_results_larger_than_the_entry_bound_are_not_kept(table, tmp_path):
    with _serve(tmp_path, table, split_cache_bytes=64 << 20, split_cache_entry_bytes=1024) as server:
        client = flight.connect(f"grpc://127.0.0.1:{server.port}")
        info = client.get_flight_info(flight.FlightDescriptor.for_path("t", "trips"))
        _read(client, info)
        _read(client, info)
        stats = server.app.split_results.stats()
        assert stats.entries == 0 and stats.bytes == 0 and stats.hits == 0
        client.close()


def test_storage_failures_reach_the_client_cleanly(table, tmp_path, monkeypatch):
    monkeypatch.setattr(storage_module, "RETRY_BACKOFF", (0.0, 0.0))
    with _serve(tmp_path, f"flakyfs://{table}") as server:
        client = flight.connect(f"grpc://127.0.0.1:{server.port}")
        descriptor = flight.FlightDescriptor.for_path("t", "trips")
        try:
            FlakyFileSystem.failures = -1
            with pytest.raises(flight.FlightUnavailableError) as caught:
                client.get_flight_info(descriptor)
            message = str(caught.value)
            assert "after 3 attempts" in message and ".hoodie/" in message
            assert "Traceback" not in message and str(table) not in message
            FlakyFileSystem.failures = 2  # transient: retried, the plan answers
            info = client.get_flight_info(descriptor)
            FlakyFileSystem.failures = 0
            assert sum(t.num_rows for t in _read(client, info)) == HudiTable.open(table).read().num_rows
        finally:
            FlakyFileSystem.failures = 0
            client.close()
