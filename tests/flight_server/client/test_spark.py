"""Spark reads through a real hudi-flight server (flight_server.spark), one SparkSession (local[2]).

Everything Spark sees comes over Flight; expectations come from ``catalog.HudiTable`` read
directly from storage.
"""

from __future__ import annotations

import json
import logging
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest

from catalog import HudiTable
from flight_server.server.config import ServerConfig
from flight_server.server.service import HudiFlightServer
from tests.support.compare import cdc_rows, rows
from tests.support.fixtures import all_table_names
from tests.support.servers import identifier, running_server
from tests.support.written import written_tables

pyspark = pytest.importorskip("pyspark")

from pyspark.sql.functions import col  # noqa: E402

from flight_server.client.session import PlannedEndpoint  # noqa: E402
from flight_server.client.spark import PYTHON_SOURCE_NAME, pack_endpoints, packed_tasks  # noqa: E402
from tests.support.spark import retried_on_worker_start  # noqa: E402

pytestmark = pytest.mark.spark

PUSHDOWN = "spark.sql.python.filterPushdown.enabled"
PARTITIONED = "sample_table/cow/v9_txns_simple_meta"  # partitioned by region: apac, eu, us
MOR_PARTITIONED = "sample_table/mor/avro/v9_txns_simple_meta"  # the same columns, merge-on-read with logs


class CountingServer(HudiFlightServer):
    """The real server, also recording how many endpoints each plan produced."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.plans: list[tuple[dict, int]] = []

    def get_flight_info(self, context, descriptor):
        info = super().get_flight_info(context, descriptor)
        command = json.loads(descriptor.command) if descriptor.command else {}
        self.plans.append((command, len(info.endpoints)))
        return info


@pytest.fixture(scope="module")
def server(tables, tmp_path_factory):
    registry, _ = tables
    config = ServerConfig(port=0, state_dir=str(tmp_path_factory.mktemp("state")),
                          allowed_roots=[str(tmp_path_factory.getbasetemp())])
    with running_server(config, registry=registry, server_class=CountingServer) as srv:
        yield srv


@pytest.fixture(scope="module")
def uri(server) -> str:
    return f"grpc://127.0.0.1:{server.port}"


def _spark_rows(df) -> pa.Table:
    return df.toArrow()


def _same(got: pa.Table, expected: pa.Table) -> None:
    """Same columns and rows; Spark's Arrow layout (zones, nested field names) is cast back first."""
    assert got.schema.names == expected.schema.names
    assert got.num_rows == expected.num_rows
    assert rows(got.cast(expected.schema)) == rows(expected)


SERVED = all_table_names()


def test_every_fixture_table_reads_like_the_library(spark, uri, tables):
    """Every served table, COW and MOR, Lance base files included, equals HudiTable.read. The reads run as
    concurrent Spark jobs to keep the suite short."""
    _, paths = tables

    def check(name: str) -> str | None:
        ident = identifier(name)
        df = spark.read.format(PYTHON_SOURCE_NAME).option("uri", uri).load(ident)
        try:
            _same(_spark_rows(df), HudiTable.open(paths[ident]).read())
        except AssertionError as err:
            return f"{name}: {err}"
        return None

    with ThreadPoolExecutor(3) as pool:
        mismatched = [m for m in pool.map(check, SERVED) if m]
    assert not mismatched, "\n".join(mismatched)


def test_schema_maps_decimals_timestamps_and_nested_types(spark, uri):
    df = spark.read.format(PYTHON_SOURCE_NAME).option("uri", uri).load(identifier("sample_table/cow/v6_nonpartitioned"))
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    assert types["decimalField"] == "decimal(10,5)"
    assert types["timestampField"] == "timestamp"
    assert types["dateField"] == "date"
    assert types["arrayField"].startswith("array<struct<arr_struct_f1:string")
    assert types["mapField"].startswith("map<string,struct<")
    assert types["structField"].startswith("struct<field1:string,field2:int")


def test_columns_option_and_time_travel(spark, uri, tables):
    _, paths = tables
    ident = identifier(PARTITIONED)
    table = HudiTable.open(paths[ident])
    first = table.timeline[0].requested_time
    df = (
        spark.read.format(PYTHON_SOURCE_NAME)
        .option("uri", uri)
        .option("columns", "txn_id,amount")
        .option("as_of", first)
        .load(ident)
    )
    assert df.columns == ["txn_id", "amount"]
    _same(_spark_rows(df), table.read(columns=["txn_id", "amount"], as_of=first))


def test_user_schema_reads_only_its_columns(spark, uri, server, tables):
    """`.schema("a string, ...")` reaches the source's reader(schema): only those columns are planned."""
    _, paths = tables
    ident = identifier(PARTITIONED)
    server.plans.clear()
    df = spark.read.format(PYTHON_SOURCE_NAME).option("uri", uri).schema("region string, txn_id string").load(ident)
    got = _spark_rows(df)
    assert [command.get("columns") for command, _ in server.plans] == [["region", "txn_id"]]
    _same(got, HudiTable.open(paths[ident]).read(columns=["region", "txn_id"]))
    with pytest.raises(Exception, match="'nope', not a column of"):
        spark.read.format(PYTHON_SOURCE_NAME).option("uri", uri).schema("txn_id string, nope int").load(ident).collect()


def test_metadata_tables_load_by_name(spark, uri, tables):
    """``load("ns.t$timeline")`` (a table name with '_', issue 40): the library's metadata table,
    with the ``columns`` and ``filters`` options applied by the server."""
    _, paths = tables
    ident = identifier(PARTITIONED)
    table = HudiTable.open(paths[ident])
    df = spark.read.format(PYTHON_SOURCE_NAME).option("uri", uri).load(f"{ident}$timeline")
    _same(_spark_rows(df), table.metadata_table("timeline"))
    commits = (spark.read.format(PYTHON_SOURCE_NAME).option("uri", uri).option("columns", "timestamp,action")
               .option("filters", "action = 'commit'").load(f"{ident}$timeline"))
    assert sorted(r.timestamp for r in commits.collect()) == sorted(
        r["timestamp"] for r in table.metadata_table("timeline").to_pylist() if r["action"] == "commit")


def test_incremental_query_type(spark, uri, tables):
    _, paths = tables
    ident = identifier(PARTITIONED)
    table = HudiTable.open(paths[ident])
    start, end = table.timeline[4].completion_time, table.timeline[9].completion_time
    df = (
        spark.read.format(PYTHON_SOURCE_NAME)
        .option("uri", uri)
        .option("query_type", "incremental")
        .option("start", start)
        .option("end", end)
        .load(ident)
    )
    expected = table.read(query_type="incremental", start=start, end=end)
    assert expected.num_rows > 0
    _same(_spark_rows(df), expected)


def test_cdc_query_type(spark, uri, tables, written_table):
    """A CDC query through the data source's options returns the library's change rows."""
    table = next(t for t in written_tables() if t.key == "1.2.0/mor_cdc_op_key_only")
    registry, _ = tables
    registry.register_table("cdc.mor_op_key_only", written_table(table))
    hudi = HudiTable.open(written_table(table))
    start = hudi.timeline.commits[0].requested_time
    df = (
        spark.read.format(PYTHON_SOURCE_NAME).option("uri", uri)
        .option("query_type", "cdc").option("start", start)
        .load("cdc.mor_op_key_only")
    )
    assert df.columns == ["op", "ts_ms", "before", "after"]
    expected = hudi.read(query_type="cdc", start=start)
    assert expected.num_rows > 0
    assert cdc_rows(_spark_rows(df)) == cdc_rows(expected)
    deletes = df.filter("op = 'd'").select("before")
    assert sorted(r.before for r in deletes.collect()) == sorted(
        r["before"] for r in expected.to_pylist() if r["op"] == "d"
    )


def test_endpoints_are_packed_by_weight(spark, uri, server):
    server.plans.clear()
    df = spark.read.format(PYTHON_SOURCE_NAME).option("uri", uri).load(identifier(PARTITIONED))
    partitions = df.rdd.getNumPartitions()
    (_, endpoints), *_ = [p for p in server.plans if p[0].get("table") == identifier(PARTITIONED)]
    assert endpoints >= 3  # at least one small file per region
    assert partitions < endpoints  # small splits share a task


def test_filters_option_prunes_endpoints_and_stays_exact(spark, uri, server, tables):
    """The ``filters`` option (the filter grammar or a JSON list) is the plan's ``filters``: the
    service prunes files with it (fewer endpoints) and applies it to rows."""
    _, paths = tables
    ident = identifier(PARTITIONED)
    table = HudiTable.open(paths[ident])
    expected = table.read(filters=[("region", "=", "eu"), ("txn_id", "!=", "TXN-015")])
    server.plans.clear()
    assert spark.read.format(PYTHON_SOURCE_NAME).option("uri", uri).load(ident).count() == table.read().num_rows
    (full,) = [n for c, n in server.plans if c.get("table") == ident]
    for given in ("region = 'eu' and txn_id != 'TXN-015'", '[["region", "=", "eu"], ["txn_id", "!=", "TXN-015"]]'):
        server.plans.clear()
        got = _spark_rows(spark.read.format(PYTHON_SOURCE_NAME).option("uri", uri).option("filters", given).load(ident))
        (plan,) = [(c["filters"], n) for c, n in server.plans if c.get("table") == ident]
        assert plan[0] == [["region", "=", "eu"], ["txn_id", "!=", "TXN-015"]]
        assert plan[1] < full
        _same(got, expected)
    with pytest.raises(Exception, match="OR at position"):
        spark.read.format(PYTHON_SOURCE_NAME).option("uri", uri).option("filters", "region = 'eu' or 1 = 1").load(ident)


def test_spark_filters_stay_with_spark_and_pushdown_true_is_refused(spark, uri, server, tables):
    """Whatever ``spark.sql.python.filterPushdown.enabled`` says, Spark's filters are evaluated by
    Spark, never sent in a plan (they would outlive their query: see the next test); asking for
    them with ``pushdown=true`` is refused, naming the ``filters`` option."""
    _, paths = tables
    ident = identifier(PARTITIONED)
    expected = HudiTable.open(paths[ident]).read(filters=[("region", "=", "us")])
    for flag in ("true", "false"):
        spark.conf.set(PUSHDOWN, flag)
        try:
            server.plans.clear()
            got = _spark_rows(spark.read.format(PYTHON_SOURCE_NAME).option("uri", uri).load(ident).where("region = 'us'"))
        finally:
            spark.conf.unset(PUSHDOWN)
        assert not any(c.get("filters") for c, _ in server.plans), flag
        _same(got, expected)
    with pytest.raises(Exception, match='"pushdown".* "filters" option'):
        spark.read.format(PYTHON_SOURCE_NAME).option("uri", uri).option("pushdown", "true").load(ident)


# -- one DataFrame, many queries (issue 37) ----------------------------------------------------


def _python_source(spark, uri: str, table: str):
    return spark.read.format(PYTHON_SOURCE_NAME).option("uri", uri).load(table)


def _connector(spark, uri: str, table: str):
    return spark.read.format("hudi-flight").option("uri", uri).load(table)


#: every Spark reader of hudi-flight, as ``load(spark, uri, "ns.t") -> DataFrame``: the Python data
#: source and the DataSource V2 connector (its jar is on the tests' session: tests.support.spark)
READERS = {"python-source": _python_source, "connector": _connector}


@pytest.fixture(params=sorted(READERS))
def load(request, spark, uri):
    """``load("ns.t")``: a new DataFrame of the table through one Spark reader of hudi-flight."""
    reader = READERS[request.param]
    return lambda table: reader(spark, uri, table)


@pytest.mark.parametrize("name", [PARTITIONED, MOR_PARTITIONED])
def test_each_query_of_one_dataframe_answers_like_a_fresh_dataframe(spark, load, tables, name):
    """Queries run one after another on ONE DataFrame (filtered, unfiltered, another filter, count,
    collect) answer what the same query on a freshly loaded DataFrame answers, and what the library
    reads, with Spark's filter pushdown on: a pushed filter never outlives its query."""
    _, paths = tables
    ident = identifier(name)
    table = HudiTable.open(paths[ident])
    everything = table.read()
    key = sorted(everything.column("txn_id").to_pylist())[0]
    queries = {
        "filtered count": (lambda df: df.where(col("txn_id") == key).count(), 1),
        "count": (lambda df: df.count(), everything.num_rows),
        "other filter, collected": (
            lambda df: rows(df.where("region = 'eu' AND txn_id IS NOT NULL").toArrow().cast(everything.schema)),
            rows(table.read(filters=[("region", "=", "eu")])),
        ),
        "collect": (lambda df: rows(df.toArrow().cast(everything.schema)), rows(everything)),
        "count after collect": (lambda df: df.count(), everything.num_rows),
        "filtered collect": (lambda df: len(df.where(col("region") == "us").collect()),
                             table.read(filters=[("region", "=", "us")]).num_rows),
        "count at last": (lambda df: df.count(), everything.num_rows),
    }
    spark.conf.set(PUSHDOWN, "true")
    try:
        df = load(ident)
        answers = {label: (query(df), query(load(ident)), expected) for label, (query, expected) in queries.items()}
    finally:
        spark.conf.unset(PUSHDOWN)
    wrong = {label: (_size(reused), _size(fresh), _size(expected)) for label, (reused, fresh, expected)
             in answers.items() if not reused == fresh == expected}
    assert not wrong, f"{name}: (same DataFrame, fresh DataFrame, the table) differ: {wrong}"


def _size(answer):
    return f"{len(answer)} rows" if isinstance(answer, list) else answer


def test_streaming_sees_each_commit_exactly_once(spark, uri, tables, tmp_path):
    _, paths = tables
    ident = identifier(PARTITIONED)
    table = HudiTable.open(paths[ident])

    def run(attempt: int):
        query = (
            spark.readStream.format(PYTHON_SOURCE_NAME)
            .option("uri", uri)
            .load(ident)
            .writeStream.format("memory")
            .queryName(f"hudi_stream_{attempt}")
            .option("checkpointLocation", str(tmp_path / f"ckpt-{attempt}"))
            .trigger(availableNow=True)
            .start()
        )
        # an availableNow query ends by itself; a loaded machine may need minutes for its 12 batches
        if not query.awaitTermination(600):
            query.stop()
            raise AssertionError("the availableNow query did not end within 600 s")
        return query, attempt

    query, attempt = retried_on_worker_start(run)
    progress = query.recentProgress
    got = _spark_rows(spark.sql(f"SELECT * FROM hudi_stream_{attempt}"))
    data = [i for i in table.timeline if i.action in ("commit", "deltacommit", "replacecommit")]
    bounds = [None] + [i.completion_time for i in data]
    parts = [table.read(query_type="incremental", start=s, end=e) for s, e in zip(bounds, bounds[1:])]
    expected = pa.concat_tables([p for p in parts if p.num_rows])
    assert len(progress) == len(data)  # one micro-batch per commit
    assert [p["numInputRows"] for p in progress] == [part.num_rows for part in parts]
    _same(got, expected)


# -- bad input -------------------------------------------------------------------------------


def test_server_down_names_the_uri(spark):
    with pytest.raises(Exception, match="127.0.0.1:1"):
        spark.read.format(PYTHON_SOURCE_NAME).option("uri", "grpc://127.0.0.1:1").load("ns.t").schema  # noqa: B018 - resolving the schema raises


def test_unknown_table_is_reported(spark, uri):
    with pytest.raises(Exception, match="nope.missing") as caught:
        spark.read.format(PYTHON_SOURCE_NAME).option("uri", uri).load("nope.missing").schema  # noqa: B018 - resolving the schema raises
    told = str(caught.value)  # inside Spark's own report of its Python worker's failure
    assert "table nope.missing not found: no namespace nope (namespaces: " in told, told


# -- pure units (no Spark job) ----------------------------------------------------------------


def _ep(weight: float) -> PlannedEndpoint:
    return PlannedEndpoint(ticket=b"t", locations=(), weight=weight, metadata={})


def test_packing_keeps_partition_weight_near_one():
    groups = pack_endpoints([_ep(0.05)] * 40 + [_ep(1.0), _ep(0.6), _ep(0.5)])
    loads = sorted(round(sum(ep.weight for ep in g.endpoints), 6) for g in groups)
    assert sum(len(g.endpoints) for g in groups) == 43
    assert all(load <= 1.0 for load in loads)
    assert len(groups) == 5  # total weight 4.1: five partitions is the minimum
    assert len(pack_endpoints([])) == 1 and not pack_endpoints([])[0].endpoints
    spread = pack_endpoints([_ep(0.05)] * 4, min_partitions=2)  # a small table still uses two cores
    assert [len(g.endpoints) for g in spread] == [2, 2]
    assert len(pack_endpoints([_ep(0.05)], min_partitions=2)) == 1


def test_packing_is_told_in_the_driver_log(caplog):
    with caplog.at_level(logging.INFO, logger="flight_server.client.spark"):
        groups = packed_tasks("ns.t", [_ep(1.0), _ep(0.5), _ep(0.25)], min_partitions=1)
    assert len(groups) == 2
    (record,) = caplog.records
    assert record.getMessage() == (
        "ns.t: 3 endpoint(s), total weight 1.75, packed into 2 Spark task(s) (endpoints@weight: 1@1.00, 2@0.75)")


SPARK_TOKEN = "spark-tls-token-0123456789abcdef"


@pytest.mark.parametrize("source", [PYTHON_SOURCE_NAME, "hudi-flight"])
def test_mtls_and_token_options_reach_driver_and_executors(spark, tables, pki, tmp_path_factory, source):
    """One small table over mutual TLS + a static token, through the Python source and the connector:
    root CA as a path, client certificate and key as PEM text; none of the secrets shows in the
    query plan, the reader's repr or an error."""
    from flight_server.client.spark import _Query
    from tests.support.credentials import allow_token_user, token_settings
    from tests.support.servers import running_server

    ca, _ = pki
    registry, paths = tables
    config = ServerConfig(port=0, state_dir=str(tmp_path_factory.mktemp("state")), tls_cert=str(ca.server_cert),
                          tls_key=str(ca.server_key), tls_client_ca=str(ca.ca_cert), **token_settings(SPARK_TOKEN))
    key_pem = ca.client_key.read_text()
    options = {"tls_root_certs": str(ca.ca_cert), "tls_cert_chain": ca.client_cert.read_text(),
               "tls_private_key": key_pem}
    ident = identifier(PARTITIONED)
    with running_server(config, registry=registry) as srv:
        allow_token_user(srv)
        uri = f"grpc+tls://127.0.0.1:{srv.port}"
        df = spark.read.format(source).option("uri", uri).option("token", SPARK_TOKEN).options(**options).load(ident)
        _same(_spark_rows(df), HudiTable.open(paths[ident]).read())
        plan = df._jdf.queryExecution().toString()
        query = repr(_Query.from_options({"uri": uri, "path": ident, "token": SPARK_TOKEN, **options}))
        for text in (plan, query):
            assert SPARK_TOKEN not in text and "PRIVATE KEY" not in text
        with pytest.raises(Exception, match="refused") as err:
            spark.read.format(source).option("uri", uri).option("token", "wrong-spark-token").options(
                **options).load(ident).collect()
        assert "wrong-spark-token" not in str(err.value) and "PRIVATE KEY" not in str(err.value)


def test_errors_reach_spark_users_in_one_line_with_hide_traceback(spark, uri):
    """Spark prints a Python worker's traceback unless ``hideTraceback`` is on (docs/spark.md);
    with it, the data source's own message is what the user reads."""
    key = "spark.sql.execution.pyspark.udf.hideTraceback.enabled"
    spark.conf.set(key, "true")
    try:
        with pytest.raises(Exception) as err:
            spark.read.format(PYTHON_SOURCE_NAME).option("uri", uri).load("no.such_table").collect()
    finally:
        spark.conf.unset(key)
    text = str(err.value)
    assert "schema of no.such_table" in text  # not registered, or refused to an anonymous caller: one line either way
    assert "Traceback" not in text and 'File "' not in text
