"""Arrow-ecosystem entry points of the client: the streaming RecordBatchReader, the lazy Polars
source and the DuckDB scan, each compared with HudiTable.read, and their pushdown checked on the
plans the client actually sent."""

from __future__ import annotations

import datetime

import duckdb
import polars as pl
import pyarrow as pa
import pytest

from catalog import HudiTable
from catalog.plan.options import read_options
from flight_server.client.duckdb import scan
from flight_server.client.polars import scan_hudi, to_filters
from flight_server.client.session import HudiFlightClient, QueryPlan
from flight_server.server.config import ServerConfig
from tests.support.compare import assert_same_rows
from tests.support.fixtures import all_table_names
from tests.support.servers import identifier, running_server

TXNS = "sample_table/cow/v9_txns_simple_meta"  # 12 rows, txn_id key, partitioned by region
MOR = "sample_table/mor/avro/v9_txns_simple_meta"


class RecordingClient(HudiFlightClient):
    """The real client, also keeping every plan it made and the rows it streamed."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.plans: list[tuple[object, QueryPlan]] = []
        self.rows = 0

    def plan(self, table, options=None, /, **kwargs):
        options = read_options(options, **kwargs)
        result = super().plan(table, options)
        self.plans.append((options, result))
        return result

    def fetch(self, endpoint, lane=0):
        for batch in super().fetch(endpoint, lane):
            self.rows += batch.num_rows
            yield batch


@pytest.fixture(scope="module")
def server(tables, tmp_path_factory):
    config = ServerConfig(port=0, state_dir=str(tmp_path_factory.mktemp("state")))
    with running_server(config, registry=tables[0]) as srv:
        yield srv


@pytest.fixture
def client(server):
    with RecordingClient(f"grpc://127.0.0.1:{server.port}", max_workers=4) as c:
        yield c


def _library(tables, name: str, **options) -> pa.Table:
    return HudiTable.open(tables[1][identifier(name)]).read(**options)


def _sorted(table: pa.Table, key: str = "txn_id") -> pa.Table:
    return table.sort_by(key)


# -- RecordBatchReader -------------------------------------------------------------------------


@pytest.mark.parametrize("name", [TXNS, MOR])
def test_reader_streams_the_library_rows(client, tables, name):
    reader = client.reader(identifier(name))
    assert isinstance(reader, pa.RecordBatchReader)
    (_, plan), = client.plans
    assert len(plan.endpoints) > 1  # several endpoints, fetched in parallel
    assert reader.schema == plan.schema
    assert_same_rows(reader.read_all(), _library(tables, name))


def test_reader_with_options_and_early_close(client, tables):
    options = dict(columns=["txn_id", "amount"], filters=[("region", "=", "eu")])
    got = client.reader(identifier(TXNS), **options).read_all()
    assert got.schema.names == ["txn_id", "amount"]
    assert_same_rows(got, _library(tables, TXNS, **options))
    reader = client.reader(identifier(TXNS))
    first = reader.read_next_batch()
    reader.close()  # stops the fetching threads; nothing hangs
    assert first.num_rows > 0


# -- Polars ------------------------------------------------------------------------------------


def test_polars_scan_equals_the_library(client, tables):
    got = scan_hudi(client, identifier(TXNS)).collect()
    expected = _library(tables, TXNS)
    assert got.columns == expected.schema.names
    assert_same_rows(got.to_arrow().cast(expected.schema), expected)


def test_polars_pushes_projection_filters_and_limit(client, tables):
    full = len(client.plan(identifier(TXNS)).endpoints)
    client.plans.clear()
    lf = scan_hudi(client, identifier(TXNS)).filter(
        (pl.col("region") == "eu") & pl.col("txn_type").is_in(["debit", "credit"]) & pl.col("txn_id").is_not_null()
    )
    got = lf.select("txn_id", "amount").collect()
    (options, plan), = client.plans
    assert set(options.columns) == {"txn_id", "amount", "region", "txn_type"}  # Polars asks for the filtered ones too
    assert set(options.filters) == {
        ("region", "=", "eu"), ("txn_type", "in", ("debit", "credit")), ("txn_id", "is not null", None)
    }
    assert len(plan.endpoints) < full  # partition pruning happened on the server
    expected = _library(tables, TXNS, columns=list(options.columns), filters=list(options.filters))
    assert expected.num_rows > 0 and client.rows == expected.num_rows
    expected = expected.select(["txn_id", "amount"])
    assert_same_rows(_sorted(got.to_arrow().cast(expected.schema)), _sorted(expected))

    client.plans.clear()
    client.rows = 0
    assert scan_hudi(client, identifier(TXNS)).head(3).collect().height == 3
    (options, _), = client.plans
    assert options.limit == 3 and client.rows == 3


def test_polars_keeps_what_it_cannot_push(client, tables):
    """A predicate with a part the service cannot take: the rest is pushed, all of it applied."""
    lf = scan_hudi(client, identifier(TXNS)).filter(
        (pl.col("region") != "us") & (pl.col("merchant_name").str.len_chars() > 5)
    )
    got = lf.select("txn_id").head(100).collect()
    (options, _), = client.plans
    assert options.filters == (("region", "!=", "us"),) and options.limit is None
    full = _library(tables, TXNS).to_pylist()
    expected = sorted(r["txn_id"] for r in full if r["region"] != "us" and len(r["merchant_name"]) > 5)
    assert expected and sorted(got["txn_id"].to_list()) == expected


def test_predicate_translation():
    schema = pa.schema([("i", pa.int64()), ("f", pa.float64()), ("s", pa.string()), ("b", pa.bool_()),
                        ("d", pa.date32()), ("t", pa.timestamp("us"))])
    filters, complete = to_filters(
        (pl.lit(3) < pl.col("i")) & (pl.col("f") <= 1.5) & pl.col("s").is_null() & (pl.col("b") == True)  # noqa: E712
        & (pl.col("d") >= datetime.date(2024, 2, 29)) & pl.col("d").is_in([datetime.date(2024, 3, 1)]),
        schema,
    )
    assert complete and filters == [("i", ">", 3), ("f", "<=", 1.5), ("s", "is null"), ("b", "=", True),
                                    ("d", ">=", "2024-02-29"), ("d", "in", ["2024-03-01"])]
    for kept in [pl.col("f") > 1, pl.col("i") == "x", pl.col("i") == 1.5, (pl.col("i") == 1) | (pl.col("i") == 2),
                 pl.col("s").is_in(["a", None]), pl.col("missing") == 1, pl.col("i") + 1 == 2,
                 pl.col("t") < datetime.datetime(2024, 1, 1), pl.col("s") == datetime.date(2024, 1, 1)]:
        assert to_filters(kept, schema) == ([], False), kept


# -- DuckDB ------------------------------------------------------------------------------------


def test_duckdb_scan_pushes_and_equals_the_library(client, tables):
    con = duckdb.connect()
    options = dict(columns=["txn_id", "region", "amount"], filters=[("region", "in", ["eu", "apac"])])
    rel = scan(con, client, identifier(TXNS), **options)
    got = rel.to_arrow_table()
    (sent, plan), = client.plans
    assert sent.columns == ("txn_id", "region", "amount") and sent.filters == (("region", "in", ("eu", "apac")),)
    expected = _library(tables, TXNS, **options)
    assert client.rows == expected.num_rows
    assert_same_rows(got, expected)
    totals = scan(con, client, identifier(TXNS), columns=["region"], limit=2).aggregate("count(*)").fetchall()
    assert client.plans[-1][0].limit == 2 and totals == [(2,)]


def test_duckdb_scan_from_a_uri_like_polars(server, tables, monkeypatch):
    """A URI opens a client for the relation, closed once its stream is read."""
    closed = []
    monkeypatch.setattr(HudiFlightClient, "close", lambda self: closed.append(self))
    lib = HudiTable.open(tables[1][identifier(TXNS)])
    first = lib.timeline[0].requested_time
    rel = scan(duckdb.connect(), f"grpc://127.0.0.1:{server.port}", identifier(TXNS), columns=["txn_id", "amount"],
               as_of=first, client_options={"max_workers": 2})
    assert not closed
    assert_same_rows(rel.to_arrow_table(), lib.read(columns=["txn_id", "amount"], as_of=first))
    assert len(closed) == 1


def test_polars_scan_from_a_uri_with_time_travel(server, tables):
    """A URI opens (and closes) a client per collect; read options reach the plan."""
    lib = HudiTable.open(tables[1][identifier(TXNS)])
    first = lib.timeline[0].requested_time
    lf = scan_hudi(f"grpc://127.0.0.1:{server.port}", identifier(TXNS), as_of=first, max_workers=2)
    got = lf.select("txn_id", "amount").collect()
    expected = lib.read(columns=["txn_id", "amount"], as_of=first)
    assert_same_rows(got.to_arrow().cast(expected.schema), expected)


def test_polars_pushes_date_comparisons(client, tables):
    full = _library(tables, TXNS)
    dates = sorted(set(full["txn_date"].to_pylist()))
    cut = dates[len(dates) // 2]
    got = scan_hudi(client, identifier(TXNS)).filter(pl.col("txn_date") >= cut).select("txn_id").collect()
    (options, _), = client.plans
    assert options.filters == (("txn_date", ">=", cut.isoformat()),)
    expected = sorted(r["txn_id"] for r in full.to_pylist() if r["txn_date"] >= cut)
    assert 0 < len(expected) < full.num_rows and client.rows == len(expected)
    assert sorted(got["txn_id"].to_list()) == expected


@pytest.mark.parametrize("name", all_table_names())
def test_polars_and_duckdb_read_every_fixture_table(server, tables, name):
    """Both entry points return exactly the library's rows on every readable fixture table."""
    uri = f"grpc://127.0.0.1:{server.port}"
    expected = _library(tables, name)
    # polars holds text, binary and lists in its own large Arrow types, DuckDB a UTC timestamp in
    # its session's zone name (Etc/UTC): both answers compared by value in the library's types
    assert_same_rows(scan_hudi(uri, identifier(name)).collect().to_arrow(), expected, exact_types=False)
    with HudiFlightClient(uri) as client:
        assert_same_rows(scan(duckdb.connect(), client, identifier(name)).to_arrow_table(), expected,
                         exact_types=False)
