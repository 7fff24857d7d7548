"""The engine scans plain Parquet base files natively (an Arrow dataset of exactly the planned
files) and answers exactly what the Python-fed stream answers; everything else stays fed
through Python."""

from __future__ import annotations

import dataclasses
import os
import shutil

import adbc_driver_flightsql.dbapi as adbc
import pyarrow as pa
import pytest

from catalog import HudiTable
from catalog.errors import CorruptTableError
from catalog.plan.dataset import Fragments, base_file_dataset
from flight_server.server.config import ServerConfig
from flight_server.server.engine.client_errors import native_read_error
from flight_server.server.engine.duckdb_engine import Engine
from flight_server.server.engine.failures import EngineFailure
from flight_server.server.engine.settings import EngineSettings
from hudi_generator.generator import COPY_ON_WRITE, GeneratorSpec, generate
from tests.flight_server.server.conftest import SECRET
from tests.support.compare import assert_same_rows
from tests.support.servers import running_server

COW = "sample_table_cow.v9_txns_simple_meta"
MOR = "sample_table_mor_avro.v9_txns_simple_meta"
MOR_WITH_LOGS = "sample_table_mor_parquet.v6_nonpartitioned"


@pytest.fixture(scope="module")
def streamed_server(sql_tables, tmp_path_factory):
    """A second server over the same tables, every view fed through Python."""
    registry, _ = sql_tables
    config = ServerConfig(port=0, state_dir=str(tmp_path_factory.mktemp("fsql-streamed")), secret=SECRET,
                          sql_memory_limit="512MB", sql_threads=1, sql_native_scan=False)
    with running_server(config, registry=registry) as srv:
        yield srv


def _query(server, sql: str) -> pa.Table:
    with adbc.connect(f"grpc://127.0.0.1:{server.port}", autocommit=True) as conn, conn.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetch_arrow_table()


def _routes(server):
    return server.app.flight_sql.statements.routes


def _instant(sql_tables, identifier: str, index: int) -> str:
    return HudiTable.open(sql_tables[1][identifier]).timeline.commits[index].requested_time


QUERIES = [
    f"SELECT region, count(*) AS n, sum(amount) AS total, max(txn_datetime) AS latest FROM {COW} "
    "WHERE amount > 10 GROUP BY region",
    f"SELECT * FROM {COW} WHERE currency = 'USD' AND NOT is_international ORDER BY txn_id",
    f"SELECT txn_type, count(DISTINCT account_id) AS accounts, min(txn_date) AS first FROM {MOR}_ro GROUP BY txn_type",
    f"SELECT count(*) AS n FROM {COW} c JOIN {MOR}_ro m USING (txn_id) WHERE c.amount <> m.amount",
    f"SELECT count(*) AS n, sum(amount) AS total FROM {COW} WHERE region = 'us' AND amount BETWEEN 1 AND 500",
    # filters of every kind the engine pushes into the dataset scan
    f"SELECT count(*) AS n, sum(fee_amount) AS fees FROM {COW} WHERE txn_date >= DATE '2024-01-01' "
    "AND txn_datetime < TIMESTAMP '2035-01-01' AND is_international IS NOT NULL",
    f"SELECT count(*) AS n FROM {COW} WHERE amount IN (100.00, 250.50, 75.25) OR merchant_name LIKE 'A%' "
    "OR fee_amount IS NULL OR txn_ts > 0",
    # a native view and a Python-fed one (merged log files) in one query
    f"SELECT (SELECT count(*) FROM {COW}) + (SELECT count(*) FROM {MOR_WITH_LOGS} WHERE intField > 0) AS n",
]


@pytest.mark.parametrize("sql", QUERIES)
def test_native_scan_answers_what_the_stream_answers(sql_server, streamed_server, sql):
    before = _routes(sql_server).native
    native = _query(sql_server, sql)
    assert _routes(sql_server).native > before  # the native route was taken
    streamed = _query(streamed_server, sql)
    assert _routes(streamed_server).native == 0
    assert native.num_rows > 0 or "JOIN" in sql
    assert_same_rows(native, streamed, sql, exact_types=True)


def test_time_travel_is_scanned_natively(sql_tables, sql_server, streamed_server):
    instant = _instant(sql_tables, COW, 1)
    sql = f"SELECT region, count(*) AS n, sum(amount) AS total FROM {COW} TIMESTAMP AS OF '{instant}' GROUP BY region"
    before = _routes(sql_server).native
    native = _query(sql_server, sql)
    assert _routes(sql_server).native == before + 1
    latest = _query(sql_server, sql.replace(f"TIMESTAMP AS OF '{instant}'", ""))
    assert_same_rows(native, _query(streamed_server, sql), sql, exact_types=True)
    assert sorted(native.column("n").to_pylist()) != sorted(latest.column("n").to_pylist())


def test_merged_slices_stay_on_the_stream(sql_server, streamed_server):
    sql = f"SELECT count(*) AS n, sum(doubleField) AS total FROM {MOR_WITH_LOGS} WHERE intField > 0"
    routes = _routes(sql_server)
    native_before, streamed_before = routes.native, routes.streamed
    answer = _query(sql_server, sql)
    assert (routes.native, routes.streamed) == (native_before, streamed_before + 1)
    assert_same_rows(answer, _query(streamed_server, sql), sql, exact_types=True)


# -- the decision, on library plans --------------------------------------------------------


def _planned(path: str, **options):
    plan = HudiTable.open(path).scan(**options)
    return plan, list(plan.splits)


def test_dataset_names_exactly_the_planned_files(sql_tables):
    plan, splits = _planned(sql_tables[1][COW], filters=[("region", "=", "us")])
    dataset = base_file_dataset(plan.context, splits, plan.options)
    assert dataset is not None
    assert dataset.schema == plan.schema
    expected = sorted(plan.context.storage.full_path(s.file_slice.base_file_path) for s in splits)
    assert sorted(dataset.files) == expected
    assert len(splits) < len(_planned(sql_tables[1][COW])[1])  # the filter pruned files


def test_incremental_mor_snapshot_and_retyped_views_are_not_native(sql_tables):
    cow = sql_tables[1][COW]
    plan, splits = _planned(cow, query_type="incremental", start=_instant(sql_tables, COW, 0))
    assert base_file_dataset(plan.context, splits, plan.options) is None
    plan, splits = _planned(sql_tables[1][MOR_WITH_LOGS])
    assert base_file_dataset(plan.context, splits, plan.options) is None
    plan, splits = _planned(sql_tables[1][MOR_WITH_LOGS], query_type="read_optimized")
    assert base_file_dataset(plan.context, splits, plan.options) is not None
    plan, splits = _planned(cow, columns=["txn_id", "amount"])
    retyped = pa.schema([plan.schema.field("txn_id"), pa.field("amount", pa.float64())])
    context = dataclasses.replace(plan.context, output_schema=retyped)
    assert base_file_dataset(context, splits, plan.options) is None  # the reader would cast


def test_a_file_gone_since_planning_stays_on_the_stream(sql_tables, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(sql_tables[1][COW], copy)
    plan, splits = _planned(str(copy))
    os.remove(plan.context.storage.full_path(splits[0].file_slice.base_file_path))
    assert base_file_dataset(plan.context, splits, plan.options) is None  # the reader reports it (NOT_FOUND)


def _engine_error(dataset) -> Exception:
    engine = Engine(EngineSettings(memory_limit="256MB", memory_budget="256MB", threads=1))
    try:
        with pytest.raises(EngineFailure) as caught:
            _, batches = engine.run("SELECT * FROM __hudi_scan_0 ORDER BY 1", {"__hudi_scan_0": dataset})
            list(batches)
    finally:
        engine.stop_all()
    return native_read_error(str(caught.value), {"__hudi_scan_0": "ns.t"})


def test_a_file_the_engine_cannot_read_is_reported_as_the_stream_does(sql_tables, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(sql_tables[1][COW], copy)
    plan, splits = _planned(str(copy))
    path = plan.context.storage.full_path(splits[0].file_slice.base_file_path)
    data = bytearray(open(path, "rb").read())
    data[40:400] = b"Z" * 360  # data pages, not the footer
    open(path, "wb").write(bytes(data))
    error = _engine_error(base_file_dataset(plan.context, splits, plan.options))
    assert isinstance(error, CorruptTableError) and "ns.t" in str(error) and str(tmp_path) not in str(error)
    others = [s for s in splits if s.file_slice.base_file_path != splits[0].file_slice.base_file_path]
    dataset = base_file_dataset(plan.context, others, plan.options)  # none of them the damaged file
    os.remove(plan.context.storage.full_path(others[0].file_slice.base_file_path))  # after its footer was read
    error = _engine_error(dataset)
    assert isinstance(error, FileNotFoundError) and str(tmp_path) not in str(error)
    assert native_read_error("SQL engine: Binder Error: column x", {"__hudi_scan_0": "ns.t"}) is None


def test_files_written_before_a_schema_change_are_not_native(tmp_path):
    path = tmp_path / "evolved"
    generate(str(path), GeneratorSpec(rows=40, partitions=1, files_per_partition=4, commits=5, evolve_schema=True,
                                      table_type=COPY_ON_WRITE, update_fraction=0.05, workers=1))
    plan, splits = _planned(str(path))
    older = [s for s in splits if plan.context.column_map(s.file_slice.base_file.instant) is not None]
    assert older and len(older) < len(splits)  # files of older schemas (renamed, dropped columns) and current ones
    assert base_file_dataset(plan.context, splits, plan.options) is None
    current = [s for s in splits if s not in older]
    assert base_file_dataset(plan.context, current, plan.options) is not None


def test_kept_fragments_serve_the_next_statement_and_name_only_its_files(sql_tables):
    fragments = Fragments()
    everything, all_splits = _planned(sql_tables[1][COW])
    first = base_file_dataset(everything.context, all_splits, everything.options, fragments)
    plan, splits = _planned(sql_tables[1][COW], filters=[("region", "=", "us")])
    dataset = base_file_dataset(plan.context, splits, plan.options, fragments)
    assert dataset is not None and first is not None
    expected = sorted(plan.context.storage.full_path(s.file_slice.base_file_path) for s in splits)
    assert sorted(dataset.files) == expected and len(expected) < len(first.files)  # kept others: not named
    before = fragments.stats()
    again = base_file_dataset(plan.context, splits, plan.options, fragments)  # the same statement again
    after = fragments.stats()
    assert after.hits - before.hits == len(splits) and after.misses == before.misses  # no footer read again
    assert again is not None and sorted(again.files) == expected
    assert again.to_table().sort_by("txn_id").equals(
        base_file_dataset(plan.context, splits, plan.options).to_table().sort_by("txn_id")
    )


def test_a_streamed_view_is_read_through_the_split_result_cache(sql_tables, tmp_path):
    """A view fed through Python reads its splits as split tickets are read: a statement run again
    is answered from the split results the first run kept."""
    registry, _ = sql_tables
    config = ServerConfig(port=0, state_dir=str(tmp_path), secret=SECRET, sql_memory_limit="512MB", sql_threads=1,
                          sql_native_scan=False, split_cache_bytes=64 << 20)
    sql = f"SELECT region, count(*) AS n FROM {COW} GROUP BY region ORDER BY region"
    with running_server(config, registry=registry) as server:
        first = _query(server, sql)
        before = server.app.split_results.stats()
        assert before.entries > 0 and before.hits == 0
        assert _query(server, sql).equals(first)
        assert server.app.split_results.stats().hits - before.hits == before.entries
