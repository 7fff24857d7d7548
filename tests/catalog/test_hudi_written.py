"""Tables written by Hudi's own Spark writer, read by us, compared with what Hudi's Spark datasource
answered for the same query (``tests/data/tables``, made by ``make tables``; no Java needed here).

Every stored query is checked: snapshot, read-optimized, time travel to each instant, incremental
ranges. Two features belong to their own work and are checked for today's clear refusal until
they land: CDC queries (``query_type="cdc"``) and Hudi 1.2's Lance base files.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import adbc_driver_flightsql.dbapi as adbc
import pyarrow as pa
import pyarrow.flight as flight
import pytest

from catalog import HudiTable
from flight_server.server.config import ServerConfig
from flight_server.server.registry import Registry
from tests.data.factory.archive import Query, read_result
from tests.data.factory.specs import TABLE_VERSIONS
from tests.support.compare import assert_same_rows
from tests.support.servers import running_server
from tests.support.written import WrittenTable, written_queries, written_tables

QUERIES = written_queries()
SNAPSHOTS = [(t, q) for t, q in QUERIES if q.name == "snapshot"]


def _id(case: tuple[WrittenTable, Query]) -> str:
    table, query = case
    return f"{table.key}:{query.name}"


def test_the_factory_tables_are_committed():
    """The matrix is present: every release, the core tables, CDC and Lance tables."""
    keys = {t.key for t in written_tables()}
    for release in ("0.15.0", "1.0.2", "1.1.1", "1.2.0"):
        assert {f"{release}/cow_core", f"{release}/mor_core"} <= keys, release
    assert {"1.2.0/cow_lance", "1.2.0/mor_lance"} <= keys
    assert any("cdc" in t.manifest().features and t.manifest().table_type == "MERGE_ON_READ" for t in written_tables())


@pytest.mark.parametrize("case", QUERIES, ids=_id)
def test_reads_equal_hudi(written_table, case):
    table, query = case
    manifest = table.manifest()
    path = written_table(table)
    expected = read_result(table.expected, query)
    what = f"{table.key} {query.name} {query.read_kwargs()}"
    if "lance" in manifest.features:
        with pytest.raises(Exception, match="(?i)lance"):
            HudiTable.open(path).read(**query.read_kwargs())
        return
    if query.query_type == "cdc":
        with pytest.raises(Exception, match="(?i)cdc"):
            HudiTable.open(path).read(**query.read_kwargs())
        return
    ours = HudiTable.open(path).read(**query.read_kwargs())
    assert_same_rows(ours, expected, what)


@pytest.mark.parametrize("table", [t for t in written_tables() if "lance" not in t.manifest().features], ids=lambda t: t.key)
def test_table_version_and_type_match_the_release(written_table, table):
    manifest = table.manifest()
    opened = HudiTable.open(written_table(table))
    assert (opened.table_version, opened.table_type) == (TABLE_VERSIONS[table.release], manifest.table_type)
    assert manifest.table_version == TABLE_VERSIONS[table.release]


# -- the same tables served: Flight and Flight SQL answer each snapshot as Hudi does ----------------


def _identifier(table: WrittenTable) -> str:
    """``1.2.0/cow_core`` -> ``hudi_1_2_0.cow_core``."""
    return f"hudi_{table.release.replace('.', '_')}.{table.name}"


@pytest.fixture(scope="module")
def written_server(written_table, tmp_path_factory):
    registry = Registry("sqlite://")
    for table in written_tables():
        registry.register_table(_identifier(table), written_table(table))
    config = ServerConfig(port=0, state_dir=str(tmp_path_factory.mktemp("written-state")), secret="ef" * 32,
                          sql_memory_limit="512MB", sql_threads=1)
    with running_server(config, registry=registry) as srv:
        yield srv


def _served_snapshot(server, table: WrittenTable) -> pa.Table:
    with flight.connect(f"grpc://127.0.0.1:{server.port}") as client:
        info = client.get_flight_info(flight.FlightDescriptor.for_path(*_identifier(table).split(".")))
        with ThreadPoolExecutor(4) as pool:
            parts = list(pool.map(lambda ep: client.do_get(ep.ticket).read_all(), info.endpoints))
    return pa.concat_tables(parts) if parts else info.schema.empty_table()


def _sql_snapshot(server, table: WrittenTable) -> pa.Table:
    with adbc.connect(f"grpc://127.0.0.1:{server.port}") as conn, conn.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {_identifier(table)}")
        return cursor.fetch_arrow_table()


@pytest.mark.parametrize("case", SNAPSHOTS, ids=_id)
@pytest.mark.parametrize("surface", ["flight", "flight_sql"])
def test_served_snapshot_equals_hudi(written_server, surface, case):
    table, query = case
    fetch = _served_snapshot if surface == "flight" else _sql_snapshot
    if "lance" in table.manifest().features:
        with pytest.raises(Exception, match="(?i)lance"):
            fetch(written_server, table)
        return
    assert_same_rows(fetch(written_server, table), read_result(table.expected, query), f"{surface} {table.key}")
