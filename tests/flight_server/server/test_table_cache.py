"""The versioned table-state cache through a real server.

A generated merge-on-read table (metadata table with files, column stats and record index) is
served from ``countfs://``, a local filesystem that records every request with its path. A
"commit" is the second commit of the same generator spec landing on a copy of the one-commit
table: data and MDT files first, the completed instant file last, as Hudi writes them.
"""

from __future__ import annotations

import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from catalog.hudi_table import HudiTable
from flight_server.server.config import ServerConfig
from flight_server.server.registry import Registry
from hudi_generator.generator import MERGE_ON_READ, GeneratorSpec
from tests.support.compare import assert_same_rows
from tests.support.counting_fs import CountingFileSystem, register
from tests.support.servers import running_server

SPEC = dict(rows=300, partitions=3, table_type=MERGE_ON_READ, record_index=True, column_stats=True)
TABLE = "cache.trips"


@pytest.fixture(scope="module")
def versions(generated_table):
    """(one-commit table, two-commit table) of one spec."""
    return generated_table(GeneratorSpec(commits=1, **SPEC)), generated_table(GeneratorSpec(commits=2, **SPEC))


def _files(root: str) -> dict[str, Path]:
    base = Path(root)
    return {str(p.relative_to(base)): p for p in base.rglob("*") if p.is_file()}


def new_commit_files(old: str, new: str) -> list[str]:
    """Files of ``new`` that ``old`` lacks, completed data-timeline instant files last."""
    added = sorted(set(_files(new)) - set(_files(old)))
    last = [f for f in added if f.startswith(".hoodie/timeline/") and "_" in Path(f).name]
    return [f for f in added if f not in last] + last


def land_commit(table: str, new: str, names: list[str]) -> None:
    for name in names:
        target = Path(table) / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(new) / name, target)


@pytest.fixture
def served(versions, tmp_path):
    """(server, flight client, table path) with a private copy of the one-commit table."""
    register()
    path = str(tmp_path / "table")
    shutil.copytree(versions[0], path)
    registry = Registry(f"sqlite:///{tmp_path / 'catalog.db'}")
    registry.register_table(TABLE, f"countfs://{path}")
    config = ServerConfig(port=0, state_dir=str(tmp_path / "state"), refresh_interval_seconds=0)
    with running_server(config, registry=registry) as server:
        client = flight.connect(f"grpc://127.0.0.1:{server.port}")
        yield server, client, path
        client.close()


def _descriptor(**options) -> flight.FlightDescriptor:
    return flight.FlightDescriptor.for_command(json.dumps({"table": TABLE, **options}).encode())


def _fetch(client: flight.FlightClient, info: flight.FlightInfo) -> pa.Table:
    with ThreadPoolExecutor(4) as pool:
        parts = list(pool.map(lambda ep: client.do_get(ep.ticket).read_all(), info.endpoints))
    return pa.concat_tables(parts) if parts else info.schema.empty_table()


def _ticket_instant(server, info: flight.FlightInfo) -> str:
    instants = {server.signer.verify(ep.ticket.ticket)["s"]["i"] for ep in info.endpoints}
    assert len(instants) == 1
    return instants.pop()


def test_unchanged_table_costs_one_timeline_listing_per_plan(served):
    server, client, path = served
    client.get_flight_info(_descriptor(filters=[["uuid", "=", "trip-0000000007"]]))  # warm
    client.get_flight_info(_descriptor())
    CountingFileSystem.reset()
    for options in ({}, {"filters": [["uuid", "=", "trip-0000000007"]]}, {"columns": ["uuid"]}):
        client.get_flight_info(_descriptor(**options))
    assert CountingFileSystem.reset() == [("list", f"{path}/.hoodie/timeline")] * 3


def test_a_commit_is_visible_to_the_next_plan_and_only_the_delta_is_read(served, versions):
    server, client, path = served
    first = client.get_flight_info(_descriptor())
    added = new_commit_files(path, versions[1])
    land_commit(path, versions[1], added)
    CountingFileSystem.reset()
    info = client.get_flight_info(_descriptor())
    calls = CountingFileSystem.reset()
    assert_same_rows(_fetch(client, info), HudiTable.open(path).read(), exact_types=True)
    assert _ticket_instant(server, info) > _ticket_instant(server, first)
    reads = {p for kind, p in calls if kind in ("read", "open")}
    new_files = {f"{path}/{name}" for name in added}
    # only the new instant's files and hoodie.properties; never an older MDT file or instant file
    assert reads - new_files == {f"{path}/.hoodie/hoodie.properties"}
    assert f"{path}/.hoodie/metadata/files" in {p for kind, p in calls if kind == "list"}
    assert server.tables.stats().entries == 1


def test_the_files_partition_is_updated_incrementally(served, versions):
    server, client, path = served
    client.get_flight_info(_descriptor())
    land_commit(path, versions[1], new_commit_files(path, versions[1]))
    client.get_flight_info(_descriptor())
    entry = server.registry.load_table(TABLE)
    state = server.tables.get(entry)
    assert state.metadata_table is not None
    assert state.metadata_table.update_counts == {"incremental": 1, "full": 0}
    fresh = HudiTable.open(path).state
    assert state.listing.list_partitions() == fresh.listing.list_partitions()
    parts = fresh.listing.list_partitions()
    assert state.listing.list_files(parts) == fresh.listing.list_files(parts)


def test_a_query_sees_exactly_the_instant_it_was_planned_at(served, versions):
    server, client, path = served
    info = client.get_flight_info(_descriptor())
    planned = _ticket_instant(server, info)
    land_commit(path, versions[1], new_commit_files(path, versions[1]))  # lands mid-query
    later = client.get_flight_info(_descriptor())
    assert _ticket_instant(server, later) > planned
    got = _fetch(client, info)
    assert_same_rows(got, HudiTable.open(path).read(as_of=planned), exact_types=True)
    assert got.num_rows != HudiTable.open(path).read().num_rows  # the commit deleted rows


def test_record_key_lookups_are_answered_from_the_cached_state(served):
    server, client, path = served
    key = [["uuid", "=", "trip-0000000042"]]
    first = _fetch(client, client.get_flight_info(_descriptor(filters=key)))
    CountingFileSystem.reset()
    again = _fetch(client, client.get_flight_info(_descriptor(filters=key)))
    kinds = [kind for kind, p in CountingFileSystem.reset() if "/.hoodie/" in p]
    assert kinds == ["list"]  # the timeline check; the record index lookup is remembered
    assert first.equals(again) and first.num_rows == 1
    other = _fetch(client, client.get_flight_info(_descriptor(filters=[["uuid", "=", "trip-0000000043"]])))
    kinds = [kind for kind, p in CountingFileSystem.reset() if "/.hoodie/" in p]
    assert kinds == ["list"] and other.num_rows == 1  # another key: the opened index answers


def test_table_states_stay_within_their_byte_bound(versions, tmp_path):
    registry = Registry(f"sqlite:///{tmp_path / 'catalog.db'}")
    for i in range(4):
        registry.register_table(f"cache.t{i}", versions[i % 2])
    state_bytes = None
    config = ServerConfig(port=0, state_dir=str(tmp_path / "state"), refresh_interval_seconds=0)
    with running_server(config, registry=registry) as server:
        client = flight.connect(f"grpc://127.0.0.1:{server.port}")
        client.get_flight_info(flight.FlightDescriptor.for_path("cache", "t0"))
        state_bytes = server.tables.stats().bytes
        client.close()
    assert state_bytes and state_bytes > 0
    bound = int(state_bytes * 2.5)
    config = ServerConfig(port=0, state_dir=str(tmp_path / "state2"), refresh_interval_seconds=0,
                          table_cache_bytes=bound)
    with running_server(config, registry=registry) as server:
        client = flight.connect(f"grpc://127.0.0.1:{server.port}")
        for i in range(4):
            client.get_flight_info(flight.FlightDescriptor.for_path("cache", f"t{i}"))
            stats = server.tables.stats()
            assert stats.bytes <= bound
        client.close()
    assert stats.evictions >= 1 and stats.entries < 4


def test_counting_filesystem_sees_the_table_files(versions):
    register()
    assert os.path.isdir(versions[0])
    assert HudiTable.open(f"countfs://{versions[0]}").read().num_rows > 0
