"""The versioned table-state cache through a real server.

A generated merge-on-read table (metadata table with files, column stats and record index) is
served from ``countfs://``, a local filesystem that records every request with its path. A
"commit" is the second commit of the same generator spec landing on a copy of the one-commit
table: data and MDT files first, the completed instant file last, as Hudi writes them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterator

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from catalog.hudi_table import HudiTable
from catalog.table.bootstrap import METADATA_BOOTSTRAP_INSTANT
from flight_server.server.cache.tables import TableCache
from flight_server.server.config import ServerConfig
from flight_server.server.registry import Registry, TableEntry
from flight_server.server.security.policy import StoragePolicy, StoragePolicyError
from flight_server.server.service import HudiFlightServer
from hudi_generator.generator import MERGE_ON_READ, GeneratorSpec
from tests.data.factory.archive import SOURCE_FOLDER, relocate_bootstrap_source
from tests.support.compare import assert_same_rows
from tests.support.counting_fs import CountingFileSystem, register
from tests.support.flight_sql import bind
from tests.support.servers import running_server
from tests.support.written import WrittenTable

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


@contextlib.contextmanager
def serving_a_copy(table: str, tmp_path: Path, **settings) -> Iterator[tuple[HudiFlightServer, flight.FlightClient, str]]:
    """(server, flight client, table path) serving a private copy of ``table`` through ``countfs``."""
    register()
    path = str(tmp_path / "table")
    shutil.copytree(table, path)
    registry = Registry(f"sqlite:///{tmp_path / 'catalog.db'}")
    registry.register_table(TABLE, f"countfs://{path}")
    config = ServerConfig(port=0, state_dir=str(tmp_path / "state"), refresh_interval_seconds=0, **settings)
    with running_server(config, registry=registry) as server:
        client = flight.connect(f"grpc://127.0.0.1:{server.port}")
        yield server, client, path
        client.close()


@pytest.fixture
def served(versions, tmp_path):
    """(server, flight client, table path) with a private copy of the one-commit table."""
    with serving_a_copy(versions[0], tmp_path) as served:
        yield served


def _descriptor(**options) -> flight.FlightDescriptor:
    return flight.FlightDescriptor.for_command(json.dumps({"table": TABLE, **options}).encode())


def _fetch(client: flight.FlightClient, info: flight.FlightInfo) -> pa.Table:
    with ThreadPoolExecutor(4) as pool:
        parts = list(pool.map(lambda ep: client.do_get(ep.ticket).read_all(), info.endpoints))
    return pa.concat_tables(parts) if parts else info.schema.empty_table()


def _ticket_instant(server, info: flight.FlightInfo) -> str:
    instants = {server.app.signer.verify(ep.ticket.ticket)["s"]["i"] for ep in info.endpoints}
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
    assert server.app.tables.stats().entries == 1


def test_the_files_partition_is_updated_incrementally(served, versions):
    server, client, path = served
    client.get_flight_info(_descriptor())
    land_commit(path, versions[1], new_commit_files(path, versions[1]))
    client.get_flight_info(_descriptor())
    entry = server.app.registry.load_table(TABLE)
    state = server.app.tables.get(entry)
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


def test_a_point_read_is_answered_at_once_and_a_scan_is_streamed(served, monkeypatch):
    """do_get of a record-key lookup reads its few rows within the call and hands Arrow a table
    (no generator); the rows are the library's; a scan of the table still streams."""
    server, client, path = served
    streamed = []
    real = server._stream
    monkeypatch.setattr(server, "_stream", lambda call, schema, batches: streamed.append(1) or real(call, schema, batches))
    key = [["uuid", "in", ["trip-0000000042", "trip-0000000007"]]]
    got = _fetch(client, client.get_flight_info(_descriptor(filters=key)))
    assert streamed == [] and got.num_rows == 2
    assert_same_rows(got, HudiTable.open(path).read(filters=key), exact_types=True)
    assert server.app.stream_memory.used == 0 and server.app.streams.in_use() == 0

    info = client.get_flight_info(_descriptor())
    assert _fetch(client, info).num_rows == HudiTable.open(path).read().num_rows
    assert len(streamed) == len(info.endpoints) > 0


def test_a_point_read_that_skipped_corrupt_blocks_streams_their_notes(served, monkeypatch):
    """Notes of corrupt log blocks met while a point read was read at once reach the client as
    the stream's app_metadata, as they do on a streamed read."""
    from catalog.format.log_file import relay_corrupt_block_notes
    from flight_server.server.query.queries import TicketStream

    server, client, _ = served
    real = server.app.queries.stream

    def noted(call, raw):
        answer = real(call, raw)

        def batches():
            relay_corrupt_block_notes(["log block 3 is corrupt"])
            yield from answer.batches

        return TicketStream(answer.schema, batches(), answer.few_rows)

    monkeypatch.setattr(server.app.queries, "stream", noted)
    info = client.get_flight_info(_descriptor(filters=[["uuid", "=", "trip-0000000042"]]))
    reader = client.do_get(info.endpoints[0].ticket)
    chunk = reader.read_chunk()
    assert chunk.data.num_rows == 1
    assert json.loads(chunk.app_metadata.to_pybytes()) == {"corrupt_blocks": ["log block 3 is corrupt"]}


def test_table_states_stay_within_their_byte_bound(versions, tmp_path):
    registry = Registry(f"sqlite:///{tmp_path / 'catalog.db'}")
    for i in range(4):
        registry.register_table(f"cache.t{i}", versions[i % 2])
    state_bytes = None
    config = ServerConfig(port=0, state_dir=str(tmp_path / "state"), refresh_interval_seconds=0)
    with running_server(config, registry=registry) as server:
        client = flight.connect(f"grpc://127.0.0.1:{server.port}")
        client.get_flight_info(flight.FlightDescriptor.for_path("cache", "t0"))
        state_bytes = server.app.tables.stats().bytes
        client.close()
    assert state_bytes and state_bytes > 0
    bound = int(state_bytes * 2.5)
    config = ServerConfig(port=0, state_dir=str(tmp_path / "state2"), refresh_interval_seconds=0,
                          table_cache_bytes=bound)
    with running_server(config, registry=registry) as server:
        client = flight.connect(f"grpc://127.0.0.1:{server.port}")
        for i in range(4):
            client.get_flight_info(flight.FlightDescriptor.for_path("cache", f"t{i}"))
            stats = server.app.tables.stats()
            assert stats.bytes <= bound
        client.close()
    assert stats.evictions >= 1 and stats.entries < 4


def test_counting_filesystem_sees_the_table_files(versions):
    register()
    assert os.path.isdir(versions[0])
    assert HudiTable.open(f"countfs://{versions[0]}").read().num_rows > 0


def _sql(client: flight.FlightClient, query: str) -> pa.Table:
    from flight_server.protocol import pack, sql

    info = client.get_flight_info(flight.FlightDescriptor.for_command(pack(sql.CommandStatementQuery(query=query))))
    return _fetch(client, info)


def _prepared(client: flight.FlightClient, query: str, key: str) -> pa.Table:
    """What ADBC does for a bound query: prepare, bind (DoPut), plan, read."""
    from flight_server.protocol import pack, sql, unpack

    request = sql.ActionCreatePreparedStatementRequest(query=query)
    created = unpack(next(iter(client.do_action(flight.Action("CreatePreparedStatement", pack(request))))).body
                     .to_pybytes())
    bound = bind(client, created.prepared_statement_handle, pa.record_batch([pa.array([key])], names=["p0"]))
    command = flight.FlightDescriptor.for_command(pack(sql.CommandPreparedStatementQuery(
        prepared_statement_handle=bound)))
    return _fetch(client, client.get_flight_info(command))


def _point_queries(client: flight.FlightClient, key: str) -> dict[str, Callable[[], pa.Table]]:
    """A point query of ``key`` on every path: JSON command, Flight SQL statement and prepared statement."""
    return {
        "json": lambda: _fetch(client, client.get_flight_info(_descriptor(filters=[["uuid", "=", key]]))),
        "sql": lambda: _sql(client, f"SELECT * FROM {TABLE} WHERE uuid = '{key}'"),
        "prepared": lambda: _prepared(client, f"SELECT * FROM {TABLE} WHERE uuid = ?", key),
    }


def test_a_point_query_lists_the_timeline_once_on_every_path(served):
    """JSON command, Flight SQL statement and prepared statement: plan and read cost one timeline
    listing in all (the prepare uses the cached state; do_get the plan it was pinned to)."""
    server, client, path = served
    paths = _point_queries(client, "trip-0000000042")
    answers = {}
    for name, query in paths.items():
        query()  # warm
        CountingFileSystem.reset()
        answers[name] = query()
        listings = [p for kind, p in CountingFileSystem.reset() if kind == "list" and "/.hoodie/" in p]
        assert listings == [f"{path}/.hoodie/timeline"], name
    assert answers["json"].num_rows == 1
    assert answers["sql"].equals(answers["json"]) and answers["prepared"].equals(answers["json"])


def test_a_warm_point_query_of_a_key_in_log_files_makes_no_request_but_the_timeline_listing(versions, tmp_path):
    """Merge-on-read: the key's latest version is in a log file of its slice; warm, on every path,
    neither the base file nor the log files are read (their blocks are kept, by path and size)."""
    table = HudiTable.open(versions[1])
    base = {r["uuid"]: r for r in table.read(query_type="read_optimized").to_pylist()}
    key = next(r["uuid"] for r in table.read().to_pylist() if base.get(r["uuid"]) not in (None, r))
    with serving_a_copy(versions[1], tmp_path) as (server, client, path):
        expected = HudiTable.open(path).read(filters=[("uuid", "=", key)])
        for name, query in _point_queries(client, key).items():
            query()  # warm
            CountingFileSystem.reset()
            got = query()
            assert CountingFileSystem.reset() == [("list", f"{path}/.hoodie/timeline")], name
            assert_same_rows(got, expected)
        assert expected.num_rows == 1 and server.app.queries.caches.log_blocks.stats().hits > 0


def test_max_staleness_skips_the_timeline_listing(versions, tmp_path):
    with serving_a_copy(versions[0], tmp_path, max_staleness_ms=3_600_000) as (server, client, path):
        first = _fetch(client, client.get_flight_info(_descriptor()))
        CountingFileSystem.reset()
        land_commit(path, versions[1], new_commit_files(path, versions[1]))
        again = _fetch(client, client.get_flight_info(_descriptor()))
        assert not [p for kind, p in CountingFileSystem.reset() if "/.hoodie/" in p]
        assert_same_rows(again, first)  # within the bound: the state it had
        server.app.tables.max_staleness_seconds = 0  # the bound passed: the next plan checks
        assert _fetch(client, client.get_flight_info(_descriptor())).num_rows != first.num_rows


def test_a_bootstrap_source_outside_the_allowed_roots_is_refused(written_table, tmp_path):
    """A bootstrapped table's ``hoodie.bootstrap.base.path`` is written by whoever writes the table:
    the server reads a source dataset only where it may read tables."""
    written = Path(written_table(WrittenTable("0.15.0", "cow_bootstrap_metadata_only")))
    table, inside, outside = tmp_path / "wh" / "t", tmp_path / "wh" / "source", tmp_path / "elsewhere"
    shutil.copytree(written, table)
    for source in (inside, outside):
        shutil.copytree(written.parent / SOURCE_FOLDER, source)
    policy = StoragePolicy(roots=[str(tmp_path / "wh")])
    entry = TableEntry("ns", "t", str(table))
    relocate_bootstrap_source(table, outside)
    with pytest.raises(StoragePolicyError, match="bootstrap source dataset") as refused:
        TableCache(check=policy.check_registered).get(entry)
    assert str(tmp_path) not in str(refused.value)
    relocate_bootstrap_source(table, inside)
    state = TableCache(check=policy.check_registered).get(entry)
    assert HudiTable(state).read(as_of=METADATA_BOOTSTRAP_INSTANT).num_rows == 12


def _copy(table: str, tmp_path: Path) -> tuple[Path, TableEntry]:
    register()
    path = tmp_path / "table"
    shutil.copytree(table, path)
    return path, TableEntry("ns", "t", f"countfs://{path}")


def test_background_refresh_lists_so_that_queries_do_not(versions, tmp_path):
    """With ``max_staleness_ms`` the queries of a recently queried table make no request: the
    background round lists its timeline (once per table when due) and the next query sees the
    commit it found. The round here is run by the test on the test's clock."""
    path, entry = _copy(versions[0], tmp_path)
    now = [1000.0]
    cache = TableCache(max_staleness_seconds=3600.0, clock=lambda: now[0])
    try:
        first = cache.get(entry)
        stats = first.storage.stats
        stats.reset()
        now[0] += 1000  # checked 1000 s ago: neither stale nor due
        assert all(cache.get(entry) is first for _ in range(5))
        assert cache.refresh is not None and cache.refresh.run_once() == 0
        assert stats.total == 0

        land_commit(str(path), versions[1], new_commit_files(str(path), versions[1]))
        now[0] += 1800  # 2800 s: due (3/4 of the bound), not yet stale
        assert cache.get(entry) is first and stats.total == 0  # the query does not list
        assert cache.refresh.run_once() == 1
        assert stats.counts["list"] >= 1  # the round listed (and read the new instant)
        stats.reset()
        now[0] += 3000  # 3000 s after the round's check: a query still reuses its state
        moved = cache.get(entry)
        assert stats.total == 0
        assert len(moved.timeline.commits) == len(first.timeline.commits) + 1

        now[0] += 100_000  # nobody queried it since: it leaves the round, nothing is listed
        assert cache.refresh.run_once() == 0 and cache.refresh.tables() == [] and stats.total == 0
    finally:
        cache.close()


def test_background_refresh_thread_finds_a_commit_and_stops_on_close(versions, tmp_path):
    """The round on its own thread: a commit reaches the cached state with no query asking
    (``fresh=False`` reads the cache without checking); closing stops the thread."""
    import time

    path, entry = _copy(versions[0], tmp_path)
    cache = TableCache(max_staleness_seconds=0.1)
    try:
        first = cache.get(entry)
        assert cache.refresh is not None and cache.refresh.running
        land_commit(str(path), versions[1], new_commit_files(str(path), versions[1]))
        deadline = time.monotonic() + 60
        while len(cache.get(entry, fresh=False).timeline.commits) == len(first.timeline.commits):
            assert time.monotonic() < deadline, "the background refresh never saw the commit"
            time.sleep(0.05)
    finally:
        cache.close()
    assert not cache.refresh.running


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_warm_point_queries_with_max_staleness_make_no_request(generated_table, tmp_path, table_type):
    """The default disk cache plus ``max_staleness_ms``: after the first, point queries of a
    remote table (plan and read) ask storage nothing: no listing, no footer, no column chunk."""
    kind = MERGE_ON_READ if table_type == "mor" else "COPY_ON_WRITE"
    table = generated_table(GeneratorSpec(commits=2, **{**SPEC, "table_type": kind}))
    with serving_a_copy(table, tmp_path, max_staleness_ms=3_600_000) as (server, client, _):
        keys = [f"trip-{i:010d}" for i in (7, 42, 7, 42)]
        first = [_fetch(client, client.get_flight_info(_descriptor(filters=[["uuid", "=", k]]))) for k in keys[:2]]
        CountingFileSystem.reset()
        again = [_fetch(client, client.get_flight_info(_descriptor(filters=[["uuid", "=", k]]))) for k in keys]
        assert CountingFileSystem.reset() == []
        assert all(t.num_rows == 1 for t in first) and again[0].equals(first[0]) and again[1].equals(first[1])


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_warm_filter_queries_make_no_request_without_the_disk_cache(generated_table, tmp_path, table_type):
    """Filter queries that are no record-key lookup (a data column, a partition and a column),
    served from the decoded columns and log blocks a process keeps (the disk cache of remote
    bytes off, so nothing else could answer): after the first, a repeated and a similar query ask
    storage nothing (with ``max_staleness_ms``, not even the timeline), and answer as the library."""
    kind = MERGE_ON_READ if table_type == "mor" else "COPY_ON_WRITE"
    table = generated_table(GeneratorSpec(commits=3, **{**SPEC, "rows": 3000, "table_type": kind}))
    first = [[["fare", ">", 900.0]], [["region", "=", "region-00001"], ["fare", "<", 300.0]]]
    similar = [[["fare", ">", 950.0]], [["region", "=", "region-00001"], ["fare", "<", 150.0]]]
    with serving_a_copy(table, tmp_path, max_staleness_ms=3_600_000, disk_cache_bytes=0) as (_, client, path):
        for filters in first:
            _fetch(client, client.get_flight_info(_descriptor(filters=filters)))
        CountingFileSystem.reset()
        got = [_fetch(client, client.get_flight_info(_descriptor(filters=f))) for f in first + similar]
        assert CountingFileSystem.reset() == []
        library = HudiTable.open(path)
        for filters, ours in zip(first + similar, got):
            assert ours.num_rows > 0
            assert_same_rows(ours, library.read(filters=[tuple(f) for f in filters]), str(filters), exact_types=True)
