"""The connector's Spark catalog (``dev.hudiflight.spark.HudiFlightCatalog``) and its micro-batch
stream, against a real server: namespaces, tables, DESCRIBE, time travel and read options in Spark
SQL, metadata tables, read-only refusals, and streaming commit by commit (compared with the Python
source's stream, which has the same semantics)."""

from __future__ import annotations

from datetime import datetime, timezone

import pyarrow as pa
import pytest

from catalog import HudiTable
from flight_server.server.config import ServerConfig
from flight_server.spark import CATALOG_CLASS
from tests.support.compare import cdc_rows, rows
from tests.support.servers import identifier, running_server
from tests.support.written import written_tables

pyspark = pytest.importorskip("pyspark")

from pyspark.errors import AnalysisException  # noqa: E402

from flight_server.client.spark import PYTHON_SOURCE_NAME, spark_schema  # noqa: E402
from tests.support.spark import local_spark  # noqa: E402

pytestmark = pytest.mark.spark

#: a name of these tests' own: Spark keeps a catalog's first configuration for the session's life,
#: and the docs' examples configure "lake" on the same session
CATALOG = "catalog_tests"
COW = "sample_table/cow/v9_txns_simple_meta"  # partitioned by region, 14 commits
MOR = "sample_table/mor/avro/v9_txns_simple_meta"  # the same columns, merge-on-read with log files
CDC_TABLE = "1.2.0/mor_cdc_op_key_only"


@pytest.fixture(scope="module")
def served(tables, written_table):
    registry, paths = tables
    cdc = next(t for t in written_tables() if t.key == CDC_TABLE)
    registry.register_table("cdc.mor_op_key_only", written_table(cdc))
    return registry, {**paths, "cdc.mor_op_key_only": written_table(cdc)}


@pytest.fixture(scope="module")
def uri(served, tmp_path_factory):
    registry, _ = served
    config = ServerConfig(port=0, state_dir=str(tmp_path_factory.mktemp("state")))
    with running_server(config, registry=registry) as server:
        yield f"grpc://127.0.0.1:{server.port}"


@pytest.fixture(scope="module")
def spark(uri):
    session = local_spark()
    session.conf.set(f"spark.sql.catalog.{CATALOG}", CATALOG_CLASS)
    session.conf.set(f"spark.sql.catalog.{CATALOG}.uri", uri)
    return session


def _same(got: pa.Table, expected: pa.Table) -> None:
    assert got.schema.names == expected.schema.names
    assert rows(got.cast(expected.schema)) == rows(expected)


def _ref(ident: str) -> str:
    namespace, name = ident.split(".")
    return f"{CATALOG}.{namespace}.`{name}`"


def test_namespaces_and_tables_are_the_servers(spark, served):
    _, paths = served
    namespaces = {r.namespace for r in spark.sql(f"SHOW NAMESPACES IN {CATALOG}").collect()}
    assert namespaces == {ident.split(".")[0] for ident in paths}
    namespace = identifier(COW).split(".")[0]
    tables = {r.tableName for r in spark.sql(f"SHOW TABLES IN {CATALOG}.{namespace}").collect()}
    assert tables == {ident.split(".")[1] for ident in paths if ident.startswith(namespace + ".")}
    with pytest.raises(AnalysisException, match="SCHEMA_NOT_FOUND"):
        spark.sql(f"SHOW TABLES IN {CATALOG}.no_such_namespace").collect()


def test_describe_and_select_give_the_librarys_schema_and_rows(spark, served):
    _, paths = served
    ident = identifier(COW)
    expected = HudiTable.open(paths[ident]).read()
    described = [(r.col_name, r.data_type) for r in spark.sql(f"DESCRIBE TABLE {_ref(ident)}").collect()]
    assert described == [(f.name, f.dataType.simpleString()) for f in spark_schema(expected.schema).fields]
    _same(spark.sql(f"SELECT * FROM {_ref(ident)}").toArrow(), expected)
    with pytest.raises(AnalysisException, match="TABLE_OR_VIEW_NOT_FOUND"):
        spark.sql(f"SELECT * FROM {CATALOG}.{ident.split('.')[0]}.no_such_table").collect()


def test_time_travel_by_version_and_timestamp(spark, served):
    """``VERSION AS OF '<instant>'`` is the library's ``as_of``; ``TIMESTAMP AS OF`` a moment: just
    before an instant's commit it sees the one before, at the commit it sees that commit."""
    _, paths = served
    ident = identifier(COW)
    table = HudiTable.open(paths[ident])
    commits = [i.requested_time for i in table.timeline if i.action == "commit"]
    # the first commit whose rows differ from those of the one before it
    index = next(i for i in range(1, len(commits))
                 if rows(table.read(as_of=commits[i])) != rows(table.read(as_of=commits[i - 1])))
    third, previous = commits[index], commits[index - 1]
    _same(spark.sql(f"SELECT * FROM {_ref(ident)} VERSION AS OF '{third}'").toArrow(), table.read(as_of=third))
    # an instant is a wall clock time of the timeline's zone (LOCAL: the server's, this process's);
    # the session's zone is UTC
    naive = datetime.strptime(third, "%Y%m%d%H%M%S%f")
    utc = table.state.config.timeline_timezone == "UTC"
    moment = naive.replace(tzinfo=timezone.utc) if utc else naive.astimezone()
    at, before = (datetime.fromtimestamp(moment.timestamp() - shift, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
                  for shift in (0, 0.001))
    for when, expected in ((at, table.read(as_of=third)), (before, table.read(as_of=previous))):
        got = spark.sql(f"SELECT * FROM {_ref(ident)} TIMESTAMP AS OF '{when}'").toArrow()
        _same(got, expected)


def test_read_optimized_incremental_and_cdc_through_options(spark, uri, served):
    _, paths = served
    mor = HudiTable.open(paths[identifier(MOR)])
    got = spark.sql(f"SELECT * FROM {_ref(identifier(MOR))} WITH ('query_type' = 'read_optimized')").toArrow()
    _same(got, mor.read(query_type="read_optimized"))

    cow = HudiTable.open(paths[identifier(COW)])
    start, end = cow.timeline[4].completion_time, cow.timeline[9].completion_time
    incremental = f"WITH ('query_type' = 'incremental', 'start' = '{start}', 'end' = '{end}')"
    expected = cow.read(query_type="incremental", start=start, end=end)
    assert expected.num_rows
    _same(spark.sql(f"SELECT * FROM {_ref(identifier(COW))} {incremental}").toArrow(), expected)
    reader = spark.read.options(query_type="incremental", start=start, end=end)
    _same(reader.table(_ref(identifier(COW))).toArrow(), expected)

    # a CDC read has its own columns, which a catalog table's (its snapshot's) cannot be: refused by
    # name; CDC reads go through the format
    cdc = HudiTable.open(paths["cdc.mor_op_key_only"])
    first = cdc.timeline.commits[0].requested_time
    with pytest.raises(Exception, match="the query's options change the columns of cdc.mor_op_key_only"):
        spark.sql(f"SELECT * FROM {_ref('cdc.mor_op_key_only')} WITH ('query_type' = 'cdc', 'start' = '{first}')"
                  ).collect()
    got = spark.read.format("hudi-flight").option("uri", uri).options(query_type="cdc", start=first).load(
        "cdc.mor_op_key_only")
    assert got.columns == ["op", "ts_ms", "before", "after"]
    expected = cdc.read(query_type="cdc", start=first)
    assert expected.num_rows
    assert cdc_rows(got.toArrow()) == cdc_rows(expected)


def test_read_optimized_view_by_its_hive_sync_name(spark, served):
    """``lake.ns.t_ro`` is the read-optimized view of the merge-on-read table ``t`` (time travel
    included); a copy-on-write table has none."""
    _, paths = served
    ident = identifier(MOR)
    mor = HudiTable.open(paths[ident])
    view = _ref(ident + "_ro")
    _same(spark.sql(f"SELECT * FROM {view}").toArrow(), mor.read(query_type="read_optimized"))
    # an instant where the view leaves out what only the log files hold
    instant = next(i.requested_time for i in mor.timeline.commits
                   if rows(mor.read(query_type="read_optimized", as_of=i.requested_time))
                   != rows(mor.read(as_of=i.requested_time)))
    _same(spark.sql(f"SELECT * FROM {view} VERSION AS OF '{instant}'").toArrow(),
          mor.read(query_type="read_optimized", as_of=instant))
    with pytest.raises(AnalysisException, match="TABLE_OR_VIEW_NOT_FOUND"):
        spark.sql(f"SELECT * FROM {_ref(identifier(COW) + '_ro')}").collect()


def test_metadata_tables(spark, served):
    _, paths = served
    ident = identifier(COW)
    table = HudiTable.open(paths[ident])
    _same(spark.sql(f"SELECT * FROM {_ref(ident + '$timeline')}").toArrow(), table.metadata_table("timeline"))
    commits = spark.sql(f"SELECT timestamp FROM {_ref(ident + '$timeline')} WHERE action = 'commit'").collect()
    assert sorted(r.timestamp for r in commits) == sorted(
        r["timestamp"] for r in table.metadata_table("timeline").to_pylist() if r["action"] == "commit")


@pytest.mark.parametrize("statement", [
    "CREATE TABLE {ns}.new_table (a INT)",
    "DROP TABLE {t}",
    "ALTER TABLE {t} ADD COLUMN b INT",
    "ALTER TABLE {t} RENAME TO {ns}.renamed",
    "CREATE NAMESPACE " + CATALOG + ".new_namespace",
    "DROP NAMESPACE {ns}",
])
def test_the_catalog_is_read_only(spark, statement):
    ident = identifier(COW)
    ns = f"{CATALOG}.{ident.split('.')[0]}"
    sql = statement.format(ns=ns, t=_ref(ident))
    verb = " ".join(statement.split()[:2])
    with pytest.raises(Exception, match=f"is read-only: {verb}"):
        spark.sql(sql).collect()


def test_inserts_are_refused(spark):
    ident = _ref(identifier(COW))
    with pytest.raises(AnalysisException, match="does not support append"):
        spark.sql(f"INSERT INTO {ident} SELECT * FROM {ident}").collect()


@pytest.mark.parametrize("source", ["hudi-flight", PYTHON_SOURCE_NAME])
def test_streams_read_each_commit_once(spark, uri, served, tmp_path, source):
    """The connector's stream and the Python source's: one micro-batch per commit with that
    commit's incremental rows, under ``Trigger.AvailableNow``; then two commits per batch
    (``max_commits_per_trigger``) from a ``start`` instant."""
    _, paths = served
    ident = identifier(COW)
    table = HudiTable.open(paths[ident])
    data = [i.completion_time for i in table.timeline if i.action in ("commit", "deltacommit", "replacecommit")]
    bounds = [None, *data]
    parts = [table.read(query_type="incremental", start=s, end=e) for s, e in zip(bounds, bounds[1:])]

    def stream(name: str, **options: str):
        query = (spark.readStream.format(source).option("uri", uri).options(**options).load(ident)
                 .writeStream.format("memory").queryName(name)
                 .option("checkpointLocation", str(tmp_path / name)).trigger(availableNow=True).start())
        assert query.awaitTermination(120)
        return query.recentProgress, spark.sql(f"SELECT * FROM {name}").toArrow()

    name = f"stream_{source.replace('-', '_')}"
    progress, got = stream(name)
    assert [p["numInputRows"] for p in progress] == [part.num_rows for part in parts]
    _same(got, pa.concat_tables(parts))

    # a start instant comes with query_type=incremental (the table's schema is asked with the options)
    progress, got = stream(name + "_from", query_type="incremental", start=data[5], max_commits_per_trigger="2")
    # each batch is Hudi's incremental answer for its two commits (a record changed twice: once)
    ends = data[5::2] + ([data[-1]] if len(data[5:]) % 2 == 0 else [])
    batches = [table.read(query_type="incremental", start=s, end=e) for s, e in zip(ends, ends[1:])]
    assert [p["numInputRows"] for p in progress] == [b.num_rows for b in batches]
    _same(got, pa.concat_tables(batches))
