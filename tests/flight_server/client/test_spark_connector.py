"""The DataSource V2 connector (spark-connector/, ``format("hudi-flight")`` with its jar on the
session) against a real hudi-flight server, one SparkSession (local[2]).

Expectations come from ``catalog.HudiTable`` read straight from storage; the Python data source
("hudi-flight-python") gives the Spark schema both must agree on. What the connector pushed is
read from Spark's own plan (``explain``), where ``BatchScan`` shows the scan's description.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as flight
import pytest

from catalog import HudiTable
from flight_server.client.session import HudiFlightClient
from flight_server.server.config import ServerConfig
from flight_server.server.service import HudiFlightServer
from tests.support.compare import rows
from tests.support.fixtures import all_table_names
from tests.support.servers import free_port, identifier, running_server

pyspark = pytest.importorskip("pyspark")

from pyspark.sql import functions as F  # noqa: E402

from flight_server.client.spark import PYTHON_SOURCE_NAME  # noqa: E402

pytestmark = pytest.mark.spark

COW = "sample_table/cow/v9_txns_simple_meta"  # partitioned by region: apac, eu, us
MOR = "sample_table/mor/avro/v9_txns_simple_meta"  # the same columns, merge-on-read with log files
NESTED = "sample_table/cow/v6_nonpartitioned"  # structs, arrays, maps, decimals, dates


@pytest.fixture(scope="module")
def server(tables, tmp_path_factory):
    registry, _ = tables
    config = ServerConfig(port=0, state_dir=str(tmp_path_factory.mktemp("state")),
                          allowed_roots=[str(tmp_path_factory.getbasetemp())])
    with running_server(config, registry=registry) as srv:
        yield srv


@pytest.fixture(scope="module")
def uri(server) -> str:
    return f"grpc://127.0.0.1:{server.port}"


@pytest.fixture(scope="module")
def paths(tables) -> dict[str, str]:
    return tables[1]


def _load(spark, uri: str, name: str, **options: str):
    return spark.read.format("hudi-flight").option("uri", uri).options(**options).load(identifier(name))


def _plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def _spark_filters(plan: str) -> list[str]:
    """The plan's Filter nodes (those Spark evaluates itself)."""
    return [line for line in plan.splitlines() if line.lstrip(" +-*()0123456789:").startswith("Filter ")]


def _same(got: pa.Table, expected: pa.Table) -> None:
    """Same columns and rows; Spark's Arrow layout (zones, nested field names) is cast back first."""
    assert got.schema.names == expected.schema.names
    assert got.num_rows == expected.num_rows
    assert rows(got.cast(expected.schema)) == rows(expected)


def test_format_hudi_flight_is_the_connector_with_its_jar(spark, uri):
    df = _load(spark, uri, COW)
    plan = _plan(df)
    assert "BatchScan" in plan and "hudi-flight " + identifier(COW) in plan and "(Python)" not in plan
    assert "PushedColumns: *" in plan  # every column: the command names none
    python = spark.read.format(PYTHON_SOURCE_NAME).option("uri", uri).load(identifier(COW))
    assert "(Python)" in _plan(python)  # the Python source, by its own name


@pytest.mark.parametrize("name", [COW, NESTED])
def test_spark_schema_is_the_python_sources(spark, uri, name):
    """Decimals, zoned timestamps, dates, structs, arrays and maps: the types PySpark gives the Python source."""
    python = spark.read.format(PYTHON_SOURCE_NAME).option("uri", uri).load(identifier(name))
    assert _load(spark, uri, name).schema == python.schema


def test_every_fixture_table_reads_like_the_library(spark, uri, paths):
    """Every served table, COW and MOR, Lance base files included, equals HudiTable.read. The reads run
    as concurrent Spark jobs to keep the suite short."""

    def check(name: str) -> str | None:
        ident = identifier(name)
        try:
            _same(_load(spark, uri, name).toArrow(), HudiTable.open(paths[ident]).read())
        except AssertionError as err:
            return f"{name}: {err}"
        return None

    with ThreadPoolExecutor(3) as pool:
        mismatched = [m for m in pool.map(check, all_table_names()) if m]
    assert not mismatched, "\n".join(mismatched)


@pytest.mark.parametrize("name", [COW, MOR])
def test_time_travel_at_every_instant_read_optimized_and_incremental(spark, uri, paths, name):
    table = HudiTable.open(paths[identifier(name)])
    instants = [i.requested_time for i in table.timeline if i.action in ("commit", "deltacommit", "replacecommit")]
    for instant in instants:
        _same(_load(spark, uri, name, as_of=instant).toArrow(), table.read(as_of=instant))
    _same(_load(spark, uri, name, query_type="read_optimized").toArrow(), table.read(query_type="read_optimized"))
    start, end = instants[1], instants[-1]
    _same(_load(spark, uri, name, query_type="incremental", start=start, end=end).toArrow(),
          table.read(query_type="incremental", start=start, end=end))


def test_nested_projection_reads_only_the_leaves_asked(spark, uri, paths):
    df = _load(spark, uri, NESTED).select("intField", F.col("structField.field2"))
    assert "PushedColumns: [intField, structField.field2]" in _plan(df)
    expected = HudiTable.open(paths[identifier(NESTED)]).read(columns=["intField", "structField.field2"])
    got = df.toArrow()
    assert got.column("intField").to_pylist() == expected.column("intField").to_pylist()
    assert got.column("field2").to_pylist() == pc.struct_field(expected.column("structField"), "field2").to_pylist()


def test_filters_the_server_carries_are_pushed_the_rest_stay_with_spark(spark, uri, paths):
    table = HudiTable.open(paths[identifier(COW)])
    df = _load(spark, uri, COW).where("region IN ('eu', 'us') AND amount >= 100 AND txn_date > DATE'2020-01-01'")
    plan = _plan(df)
    assert "[region, in, [eu, us]]" in plan and "[amount, >=, 100" in plan and "[txn_date, >, 2020-01-01]" in plan
    assert not _spark_filters(plan)  # all pushed: Spark evaluates nothing on top
    expected = table.read(filters=[("region", "in", ["eu", "us"]), ("amount", ">=", "100"),
                                   ("txn_date", ">", "2020-01-01")])
    _same(df.toArrow(), expected)
    # OR and functions are not the server's: Spark filters the rows (the scan reads them all)
    kept = _load(spark, uri, COW).where("region = 'eu' OR length(txn_id) > 100")
    plan = _plan(kept)
    assert _spark_filters(plan) and "PushedFilters: []" in plan
    _same(kept.toArrow(), table.read(filters=[("region", "=", "eu")]))


def test_count_min_max_are_answered_from_metadata_on_copy_on_write(spark, uri, paths):
    everything = HudiTable.open(paths[identifier(COW)]).read()
    df = _load(spark, uri, COW).agg(F.count("*"), F.count("currency"), F.min("txn_ts"), F.max("txn_date"))
    plan = _plan(df)
    assert "PushedAggregates: [[count, *], [count, currency], [min, txn_ts], [max, txn_date]]" in plan
    got = df.collect()[0]
    assert got[0] == everything.num_rows
    assert got[1] == everything.num_rows - everything.column("currency").null_count
    assert got[2] == pc.min(everything.column("txn_ts")).as_py()
    assert got[3] == pc.max(everything.column("txn_date")).as_py()
    # a filter pushed with them: answered only where the footers prove every row matches, else scanned
    filtered = _load(spark, uri, COW).where("region = 'eu'").agg(F.count("*"))
    assert filtered.collect()[0][0] == pc.sum(pc.equal(everything.column("region"), "eu")).as_py()


def test_aggregates_metadata_cannot_answer_fall_back_to_a_scan(spark, uri, paths):
    """``min`` of a floating-point or a grouped count is never answered from metadata: Spark scans."""
    everything = HudiTable.open(paths[identifier(MOR)]).read()
    grouped = _load(spark, uri, MOR).groupBy("region").count()
    assert "PushedAggregates" not in _plan(grouped)
    counts = {r["region"]: r["count"] for r in grouped.collect()}
    values, numbers = pc.value_counts(everything.column("region")).flatten()
    assert counts == dict(zip(values.to_pylist(), numbers.to_pylist()))
    assert _load(spark, uri, MOR).count() == everything.num_rows


def test_limit_is_pushed(spark, uri):
    df = _load(spark, uri, COW).limit(3)
    assert "PushedLimit: 3" in _plan(df)
    assert len(df.collect()) == 3


def test_statistics_reach_the_optimizer(spark, uri):
    df = _load(spark, uri, COW)
    with HudiFlightClient(uri) as client:
        plan = client.plan(identifier(COW))
    spark.conf.set("spark.sql.cbo.enabled", "true")
    try:
        stats = df._jdf.queryExecution().optimizedPlan().stats()
        assert stats.rowCount().get() == plan.total_records
        assert int(str(stats.sizeInBytes())) == plan.total_bytes
    finally:
        spark.conf.unset("spark.sql.cbo.enabled")


def test_an_unreachable_location_is_read_from_the_planning_server(spark, tables, paths, tmp_path_factory):
    """Endpoints name a data server that is gone: each stream is read from the server that planned it."""
    registry, _ = tables
    config = ServerConfig(port=0, state_dir=str(tmp_path_factory.mktemp("relocated")),
                          locations=[f"grpc://127.0.0.1:{free_port()}"])
    with running_server(config, registry=registry) as srv:
        df = _load(spark, f"grpc://127.0.0.1:{srv.port}", COW)
        _same(df.toArrow(), HudiTable.open(paths[identifier(COW)]).read())


class _BreakingServer(HudiFlightServer):
    """The first stream of each ticket sends one row, then breaks (UNAVAILABLE, as a connection
    reset); the next stream of it sends the server's own batches, so a reader resuming there must cut
    the row it already has out of a batch."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.seen: set[bytes] = set()
        self.breaks = 0
        self._lock = threading.Lock()
        self._breaking = threading.local()

    def do_get(self, context, ticket):
        with self._lock:
            self._breaking.now = ticket.ticket not in self.seen
            self.seen.add(ticket.ticket)
        return super().do_get(context, ticket)

    def _stream(self, call, schema, batches):
        return super()._stream(call, schema, self._one_row_then_break(schema, batches) if self._breaking.now else batches)

    def _one_row_then_break(self, schema, batches):
        rows = pa.Table.from_batches(list(batches), schema)
        if rows.num_rows > 1:
            yield rows.slice(0, 1).to_batches()[0]
            with self._lock:
                self.breaks += 1
            raise flight.FlightUnavailableError("connection reset")
        yield from rows.to_batches()


def test_a_stream_broken_midway_resumes_past_the_rows_delivered(spark, tables, paths, tmp_path_factory):
    registry, _ = tables
    config = ServerConfig(port=0, state_dir=str(tmp_path_factory.mktemp("breaking")),
                          allowed_roots=[str(tmp_path_factory.getbasetemp())])
    with running_server(config, registry=registry, server_class=_BreakingServer) as srv:
        df = _load(spark, f"grpc://127.0.0.1:{srv.port}", MOR)
        _same(df.toArrow(), HudiTable.open(paths[identifier(MOR)]).read())
        assert srv.breaks > 0  # streams broke after a row, and the reads resumed past it


def test_bad_options_are_refused_by_name(spark, uri):
    with pytest.raises(Exception, match='option "uri" is required'):
        spark.read.format("hudi-flight").load(identifier(COW)).schema  # noqa: B018 - resolving the schema raises
    with pytest.raises(Exception, match="JSON list of \\[column, op, value\\]"):
        _load(spark, uri, COW, filters="region = 'eu'").schema  # noqa: B018
    with pytest.raises(Exception, match="schema of nope.missing"):
        spark.read.format("hudi-flight").option("uri", uri).load("nope.missing").schema  # noqa: B018
