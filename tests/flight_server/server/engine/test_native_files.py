"""Local Parquet base files are read by the engine's own Parquet reader, on a database that may
read exactly the planned files: the answers are the Arrow scan's, and no statement reaches any
other file (or the planned ones by any way but the view)."""

from __future__ import annotations

import datetime
import os
import time
from concurrent.futures import ThreadPoolExecutor

import adbc_driver_flightsql.dbapi as adbc
import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from catalog import HudiTable
from catalog.plan.dataset import Fragments, base_file_dataset
from catalog.read.split_reader import read_splits
from flight_server.server.engine import databases
from flight_server.server.engine import duckdb_engine as engine_module
from flight_server.server.engine.client_errors import native_read_error
from flight_server.server.engine.databases import DatabaseSpec
from flight_server.server.engine.duckdb_engine import Engine, connect
from flight_server.server.engine.failures import EngineFailure
from flight_server.server.engine.native_files import parquet_files
from flight_server.server.engine.settings import EngineSettings
from hudi_generator.generator import COPY_ON_WRITE, MERGE_ON_READ, GeneratorSpec, generate
from tests.support.compare import assert_same_rows
from tests.support.written import written_tables

COW = "sample_table_cow.v9_txns_simple_meta"
MOR = "sample_table_mor_avro.v9_txns_simple_meta"

_PARQUET = ds.ParquetFileFormat()


@pytest.fixture
def engine():
    engine = Engine(EngineSettings(memory_limit="256MB", memory_budget="512MB", threads=1))
    yield engine
    engine.stop_all()


def _dataset(paths: list[str], schema: pa.Schema) -> ds.FileSystemDataset:
    """What :func:`base_file_dataset` makes: fragments of local files with their footers read."""
    local = pafs.LocalFileSystem()
    fragments = []
    for path in paths:
        fragment = _PARQUET.make_fragment(path, filesystem=local)
        fragment.ensure_complete_metadata()
        fragments.append(fragment)
    return ds.FileSystemDataset(fragments, schema, _PARQUET, local)


def _run(engine: Engine, sql: str, views: dict) -> pa.Table:
    schema, batches = engine.run(sql, views)
    return pa.Table.from_batches(list(batches), schema)


@pytest.fixture
def files(tmp_path):
    """Two files holding the view's columns in different orders, one with an extra column, and
    a third file no view names."""
    a, b, other = (str(tmp_path / name) for name in ("a.parquet", "b.parquet", "other.parquet"))
    pq.write_table(pa.table({"x": pa.array(range(10), pa.int64()), "s": ["a"] * 10}), a)
    pq.write_table(pa.table({"extra": [1.5] * 5, "s": ["b"] * 5, "x": pa.array(range(5), pa.int64())}), b)
    pq.write_table(pa.table({"x": pa.array([1000], pa.int64()), "s": ["secret"]}), other)
    return a, b, other


SCHEMA = pa.schema([("x", pa.int64()), ("s", pa.string())])


def test_local_files_are_read_by_the_engines_own_reader(engine, files):
    a, b, _ = files
    dataset = _dataset([a, b, a], SCHEMA)  # a file cut into two splits is named twice
    found = parquet_files(dataset)
    assert found is not None and found.paths == (a, b)
    sql = "SELECT s, count(*) AS n, sum(x) AS total FROM v WHERE x > 1 GROUP BY s ORDER BY s"
    native = _run(engine, sql, {"v": dataset})
    assert engine.file_views.read == 1 and engine.file_views.declined == 0
    assert native.to_pylist() == [{"s": "a", "n": 8, "total": 44}, {"s": "b", "n": 3, "total": 9}]
    through_arrow = _run(engine, sql, {"v": _dataset([a, b], SCHEMA).to_table()})
    assert native.equals(through_arrow)
    assert _run(engine, "SELECT * FROM v ORDER BY s, x", {"v": dataset}).schema == SCHEMA


def test_quotes_and_line_breaks_in_paths_and_column_names_are_read_as_written(engine, tmp_path):
    folder = tmp_path / "o'brien \"lake\"\nx"
    folder.mkdir()
    path = str(folder / "f'1.parquet")
    odd = pa.schema([("it's \"x\"", pa.int64())])
    pq.write_table(pa.table({"it's \"x\"": pa.array([1, 2, 3], pa.int64())}, schema=odd), path)
    got = _run(engine, 'SELECT sum("it\'s ""x""") AS total FROM v', {"v": _dataset([path], odd)})
    assert engine.file_views.read == 1 and got.to_pylist() == [{"total": 6}]


def test_a_database_may_read_exactly_its_files(files):
    a, b, other = files
    db = connect(EngineSettings(memory_limit="256MB", threads=2), DatabaseSpec(frozenset([a, b]), 1))
    try:
        assert db.execute(f"SELECT count(*) FROM read_parquet(['{a}', '{b}'])").fetchall() == [(15,)]
        assert db.execute("SELECT current_setting('threads'), current_setting('parquet_metadata_cache')").fetchall() == [
            (1, True)
        ]
        refused = [
            "SET threads = 2",
            "SET parquet_metadata_cache = false",
            f"SELECT * FROM read_parquet('{other}')",
            f"SELECT * FROM read_parquet('{os.path.dirname(a)}/*.parquet')",
            "SELECT * FROM read_csv('/etc/passwd')",
            f"COPY (SELECT 1) TO '{os.path.dirname(a)}/out.parquet'",
            f"SET allowed_paths = ['{other}']",
            "SET enable_external_access = true",
            "SET lock_configuration = false",
        ]
        for sql in refused:
            with pytest.raises(duckdb.Error):
                db.execute(sql)
    finally:
        db.close()
    assert not os.path.exists(os.path.join(os.path.dirname(a), "out.parquet"))


def _threads_of_idle_databases(engine: Engine) -> list[int]:
    return [database.connection.execute("SELECT current_setting('threads')").fetchall()[0][0]
            for database in engine.databases.idle()]


def test_a_small_scan_runs_on_one_thread_a_large_one_on_every_configured_one(files, monkeypatch):
    """One engine thread per ROWS_PER_THREAD rows of natively read files (a second thread costs
    a small scan CPU and gains it no time), at most ``sql_threads``; every configured thread when
    a view streams (its size is not known)."""
    a, b, _ = files  # 15 rows
    engine = Engine(EngineSettings(memory_limit="256MB", memory_budget="1GB", threads=2))
    try:
        sql = "SELECT count(*) AS n FROM v"
        assert _run(engine, sql, {"v": _dataset([a, b], SCHEMA)}).to_pylist() == [{"n": 15}]
        assert _threads_of_idle_databases(engine) == [1]
        streamed = pa.RecordBatchReader.from_batches(SCHEMA, pa.table({"x": [1], "s": ["c"]}, schema=SCHEMA).to_batches())
        both = _run(engine, "SELECT (SELECT count(*) FROM v) + (SELECT count(*) FROM w) AS n",
                    {"v": _dataset([a, b], SCHEMA), "w": streamed})
        assert both.to_pylist() == [{"n": 16}]
        assert sorted(_threads_of_idle_databases(engine)) == [1, 2]
        monkeypatch.setattr(engine_module, "ROWS_PER_THREAD", 10)  # 15 rows: two threads' worth
        assert _run(engine, sql, {"v": _dataset([b, a], SCHEMA)}).to_pylist() == [{"n": 15}]
        assert engine.databases.created == 2  # lent the database of the same files on two threads
        monkeypatch.setattr(engine_module, "ROWS_PER_THREAD", 1)  # ten threads' worth: still at most two
        assert _run(engine, sql, {"v": _dataset([a], SCHEMA)}).to_pylist() == [{"n": 10}]
        assert sorted(_threads_of_idle_databases(engine)) == [1, 2, 2] and engine.databases.created == 3
    finally:
        engine.stop_all()


def test_a_statement_cannot_name_a_file_even_one_of_its_views(engine, files):
    a, b, other = files
    views = {"v": _dataset([a, b], SCHEMA)}
    for name in (a, other, os.path.basename(a)):
        for sql in (
            f'SELECT * FROM "{name}"',
            # how a CTE's scope hides a name from the rewrite to views: DuckDB reads the outer one as a file
            f'SELECT * FROM (WITH "{name}" AS (SELECT 1 AS x) SELECT x FROM "{name}") q, "{name}"',
            f'WITH c AS (SELECT * FROM "{name}") SELECT * FROM v, c',
        ):
            with pytest.raises(EngineFailure, match="is not allowed: SQL reads only catalog tables"):
                _run(engine, sql, views)
    # '.parquet' in a string literal is no table name
    assert _run(engine, "SELECT count(*) AS n FROM v WHERE s <> 'x.parquet'", views).column("n").to_pylist() == [15]


def test_databases_are_kept_per_file_set(engine, files):
    a, b, other = files
    for _ in range(3):
        _run(engine, "SELECT sum(x) AS t FROM v", {"v": _dataset([a, b], SCHEMA)})
    assert engine.databases.created == 1  # the same file set: the same database, never a new one
    _run(engine, "SELECT sum(x) AS t FROM v", {"v": _dataset([a], SCHEMA)})
    _run(engine, "SELECT 1 AS one", {})
    assert engine.databases.created == 3  # one per file set, and one that may read no file
    assert len(engine.databases.idle()) == 2  # bounded: sql_memory_budget / sql_memory_limit
    with pytest.raises(EngineFailure):  # the plain database reads no file
        _run(engine, f"SELECT * FROM \"{a}\"", {})


def test_native_views_and_bound_statements_are_kept_per_database(engine, files):
    a, b, _ = files
    sql = "SELECT sum(x) AS t FROM v"
    answers = {_run(engine, sql, {"v": _dataset([a, b], SCHEMA)}).column("t")[0].as_py() for _ in range(3)}
    (database,) = engine.databases.idle()
    assert len(answers) == 1 and database.bound == 1 and list(database.views) == ["v"]
    assert engine.file_views.read == 3
    # another statement over the same files under another name: the earlier view is gone
    assert _run(engine, "SELECT count(*) AS n FROM w", {"w": _dataset([b, a], SCHEMA)}).num_rows == 1
    assert list(database.views) == ["w"] and database.bound == 2
    # a view registered through Arrow, next to a native one of these files: the native 'w' is dropped
    both = {"w": pa.table({"x": pa.array([7], pa.int64())}), "v": _dataset([a, b], SCHEMA)}
    got = _run(engine, "SELECT (SELECT sum(x) FROM w) AS t, (SELECT count(*) FROM v) AS n", both)
    assert got.to_pylist() == [{"t": 7, "n": 15}]
    assert engine.databases.idle() == [database] and list(database.views) == ["v"]
    with pytest.raises(EngineFailure, match="w"):  # the registered view went with its query
        _run(engine, "SELECT (SELECT count(*) FROM w) AS t, (SELECT count(*) FROM v) AS n",
             {"v": _dataset([a, b], SCHEMA)})
    _run(engine, "SELECT count(*) AS n FROM w", {"w": _dataset([a, b], SCHEMA)})
    with pytest.raises(EngineFailure, match="v"):  # no view of an earlier query is seen
        _run(engine, "SELECT sum(x) AS t FROM v", {"w": _dataset([a, b], SCHEMA)})


def test_bound_statements_kept_are_bounded_least_recently_used_first(engine, files, monkeypatch):
    monkeypatch.setattr(databases, "STATEMENTS_KEPT", 2)
    a, b, _ = files
    texts = ["SELECT sum(x) AS t FROM v", "SELECT count(*) AS t FROM v", "SELECT max(x) AS t FROM v"]
    for sql in [*texts, texts[2], texts[0]]:  # the third is kept, the first was dropped for it
        _run(engine, sql, {"v": _dataset([a, b], SCHEMA)})
    (database,) = engine.databases.idle()
    assert database.bound == 4


def test_a_file_duckdb_would_type_otherwise_is_scanned_through_arrow(engine, tmp_path):
    path = str(tmp_path / "int96.parquet")
    moment = datetime.datetime(2024, 5, 1, 12, 0, 0, 123456)
    table = pa.table({"t": pa.array([moment], pa.timestamp("ns")), "n": [1]})
    pq.write_table(table, path, use_deprecated_int96_timestamps=True)
    dataset = _dataset([path], pa.schema([("t", pa.timestamp("ns")), ("n", pa.int64())]))
    assert dataset.to_table().column("t").type == pa.timestamp("ns")  # Arrow reads INT96 as nanoseconds
    answer = _run(engine, "SELECT t, n FROM v", {"v": dataset})
    assert (engine.file_views.read, engine.file_views.declined) == (0, 1)
    assert answer.schema.field("t").type == pa.timestamp("ns") and answer.column("t").to_pylist() == [moment]


def test_a_file_gone_or_damaged_is_reported_without_its_path(engine, files):
    a, b, _ = files
    dataset = _dataset([a, b], SCHEMA)
    os.remove(b)  # after its footer was read (planned), before the engine reads it
    with pytest.raises(EngineFailure) as caught:
        _run(engine, "SELECT sum(x) FROM __hudi_scan_0", {"__hudi_scan_0": dataset})
    assert os.path.dirname(a) not in str(caught.value)
    error = native_read_error(str(caught.value), {"__hudi_scan_0": "ns.t"})
    assert isinstance(error, FileNotFoundError) and "ns.t" in str(error)


# -- side by side with the Python-fed reader, on Hudi tables ----------------------------------


def _side_by_side(engine: Engine, path: str, sql: str, **options) -> pa.Table:
    """``sql`` over view ``t`` read natively and fed through our reader: the same rows and types."""
    plan = HudiTable.open(path).scan(**options)
    splits = list(plan.splits)
    dataset = base_file_dataset(plan.context, splits, plan.options, Fragments())
    assert dataset is not None and parquet_files(dataset) is not None
    read_before = engine.file_views.read
    native = _run(engine, sql, {"t": dataset})
    assert engine.file_views.read == read_before + 1
    stream = pa.RecordBatchReader.from_batches(plan.schema, read_splits(plan.context, splits, None))
    assert_same_rows(native, _run(engine, sql, {"t": stream}), sql, exact_types=True)
    return native


def test_cow_partitioned_and_filtered(engine, sql_tables):
    path = sql_tables[1][COW]
    _side_by_side(engine, path, "SELECT * FROM t")
    sql = "SELECT region, count(*) AS n, sum(amount) AS total, min(txn_datetime) AS first FROM t GROUP BY region"
    assert _side_by_side(engine, path, sql).num_rows > 1  # several partitions
    _side_by_side(engine, path, "SELECT txn_id, amount FROM t WHERE region = 'us'", filters=[("region", "=", "us")])


def test_mor_read_optimized_and_time_travel(engine, sql_tables):
    mor = sql_tables[1][MOR]
    _side_by_side(engine, mor, "SELECT txn_type, count(*) AS n, max(amount) AS top FROM t GROUP BY txn_type",
                  query_type="read_optimized")
    cow = sql_tables[1][COW]
    first = HudiTable.open(cow).timeline.commits[0].requested_time
    old = _side_by_side(engine, cow, "SELECT count(*) AS n FROM t", as_of=first)
    assert old.column("n").to_pylist() != _side_by_side(engine, cow, "SELECT count(*) AS n FROM t").column("n").to_pylist()


def test_mor_snapshot_of_slices_without_logs(engine, tmp_path):
    path = str(tmp_path / "mor")
    generate(path, GeneratorSpec(rows=60, partitions=2, files_per_partition=1, commits=1, table_type=MERGE_ON_READ,
                                 workers=1))
    _side_by_side(engine, path, "SELECT * FROM t")


def test_schema_evolved_table_current_files(engine, tmp_path):
    path = str(tmp_path / "evolved")
    generate(path, GeneratorSpec(rows=40, partitions=1, files_per_partition=4, commits=5, evolve_schema=True,
                                 table_type=COPY_ON_WRITE, update_fraction=0.05, workers=1))
    plan = HudiTable.open(path).scan()
    current = [s for s in plan.splits if plan.context.column_map(s.file_slice.base_file.instant) is None]
    sql = "SELECT count(*) AS n FROM t"
    dataset = base_file_dataset(plan.context, current, plan.options)
    assert dataset is not None
    stream = pa.RecordBatchReader.from_batches(plan.schema, read_splits(plan.context, current, None))
    assert _run(engine, sql, {"t": dataset}).equals(_run(engine, sql, {"t": stream}))
    assert engine.file_views.read == 1


# -- through Flight SQL ---------------------------------------------------------------------


def _query(server, sql: str) -> pa.Table:
    with adbc.connect(f"grpc://127.0.0.1:{server.port}", autocommit=True) as conn, conn.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetch_arrow_table()


def test_flight_sql_reads_local_tables_with_the_engines_reader(sql_server):
    views = sql_server.app.flight_sql.statements.engine.file_views
    before = views.read
    answer = _query(sql_server, f"SELECT count(*) AS n, sum(amount) AS total FROM {COW} WHERE amount > 10")
    assert views.read == before + 1 and answer.column("n")[0].as_py() > 0


def test_flight_sql_refuses_every_other_way_to_a_file(sql_server, sql_tables):
    plan = HudiTable.open(sql_tables[1][COW]).scan()
    path = plan.context.storage.full_path(next(iter(plan.splits)).file_slice.base_file_path)
    other = HudiTable.open(sql_tables[1][MOR]).scan(query_type="read_optimized")
    other_path = other.context.storage.full_path(next(iter(other.splits)).file_slice.base_file_path)
    statements = [
        f"SELECT * FROM read_blob('{path}')",
        f"SELECT * FROM parquet_metadata('{path}')",
        f"SELECT * FROM read_parquet('{path}')",
        f"SELECT * FROM glob('{os.path.dirname(path)}/*')",
        f"SELECT * FROM '{path}'",
        # a name out of its CTE's scope reaches the engine as written (refused: test above)
        f"SELECT count(*) FROM {COW}, (WITH \"{path}\" AS (SELECT 1 AS x) SELECT x FROM \"{path}\") q, \"{path}\"",
        f"SELECT count(*) FROM {COW}, (WITH \"{other_path}\" AS (SELECT 1 AS x) SELECT x FROM \"{other_path}\") q, "
        f"\"{other_path}\"",
        f"ATTACH '{path}' AS stolen",
        f"SET allowed_paths = ['{path}']",
        "SET enable_external_access = true",
        f"COPY (SELECT 1) TO '{path}'",
        f"PRAGMA parquet_metadata('{path}')",
    ]
    size = os.path.getsize(path)
    for sql in statements:
        with pytest.raises(adbc.Error) as caught:
            _query(sql_server, sql)
        assert any(code in str(caught.value) for code in ("INVALID_ARGUMENT", "NOT_FOUND")), sql
    assert os.path.getsize(path) == size


def test_sql_native_reader_false_scans_through_arrow(files):
    a, b, _ = files
    engine = Engine(EngineSettings(memory_limit="256MB", memory_budget="512MB", threads=1, native_reader=False))
    try:
        answer = _run(engine, "SELECT sum(x) AS t FROM v", {"v": _dataset([a, b], SCHEMA)})
        assert answer.column("t").to_pylist() == [55]
        assert engine.file_views.read == 0 and engine.databases.created == 1  # the database that reads no file
    finally:
        engine.stop_all()


# -- tables Hudi's Spark writer wrote: every type it writes ---------------------------------------

WRITTEN = [t for t in written_tables() if t.name in ("cow_types", "cow_core", "mor_types", "mor_core")]


@pytest.mark.parametrize("table", WRITTEN, ids=lambda t: t.key)
def test_hudi_written_tables_read_natively_answer_as_the_stream(written_table, table):
    options = {"query_type": "read_optimized"} if table.name.startswith("mor_") else {}
    path = written_table(table)
    everything = HudiTable.open(path).scan(**options)
    # the columns every base file stores with the table's type (the others the reader casts: not native)
    stored = [pq.read_schema(everything.context.storage.full_path(s.file_slice.base_file_path))
              for s in everything.splits]
    columns = [f.name for f in everything.schema
               if all(f.name in schema.names and schema.field(f.name).type == f.type for schema in stored)]
    plan = HudiTable.open(path).scan(columns=columns, **options)
    splits = list(plan.splits)
    dataset = base_file_dataset(plan.context, splits, plan.options)
    assert dataset is not None and len(columns) > 5, table.key
    engine = Engine(EngineSettings(memory_limit="256MB", memory_budget="256MB", threads=1))
    try:
        for sql in ("SELECT * FROM t", "SELECT count(*) AS n FROM t"):
            native = _run(engine, sql, {"t": dataset})
            stream = pa.RecordBatchReader.from_batches(plan.schema, read_splits(plan.context, splits, None))
            assert_same_rows(native, _run(engine, sql, {"t": stream}), f"{table.key}: {sql}", exact_types=True)
        assert engine.file_views.read == 2  # DuckDB's own reader types every Spark-written column as Arrow does
    finally:
        engine.stop_all()


def test_the_deadline_interrupts_a_query_over_files_the_engine_reads(tmp_path):
    path = str(tmp_path / "big.parquet")
    pq.write_table(pa.table({"x": pa.array(range(200_000), pa.int64()), "s": ["v"] * 200_000}), path)
    engine = Engine(EngineSettings(memory_limit="256MB", memory_budget="256MB", threads=1, timeout_seconds=0.5))
    try:
        started = time.monotonic()
        with pytest.raises(EngineFailure, match="sql_timeout_seconds"):
            _run(engine, "SELECT count(*) FROM v a, v b WHERE a.x + b.x > -1", {"v": _dataset([path], SCHEMA)})
        assert engine.file_views.read == 1 and time.monotonic() - started < 30
    finally:
        engine.stop_all()


def test_concurrent_queries_each_get_a_database_of_their_files(engine, files):
    a, b, _ = files
    sets = [[a], [b], [a, b]]
    expected = {0: 45, 1: 10, 2: 55}

    def query(i: int) -> int:
        table = _run(engine, "SELECT sum(x) AS t FROM v", {"v": _dataset(sets[i % 3], SCHEMA)})
        return table.column("t")[0].as_py()

    with ThreadPoolExecutor(2) as pool:  # as many as the budget admits at once: none waits
        answers = list(pool.map(query, range(24)))
    assert answers == [expected[i % 3] for i in range(24)]
    assert len(engine.databases.idle()) <= 2 and engine.file_views.read == 24
