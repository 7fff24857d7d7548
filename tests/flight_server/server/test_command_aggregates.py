"""The command's ``aggregates`` through a plain ``pyarrow.flight`` client: count, min and max
answered from metadata (one endpoint, one row, ``{"aggregates": "metadata"}``) where exact, else
UNIMPLEMENTED naming why; the options they do not take are INVALID_ARGUMENT."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as flight
import pytest

from catalog.hudi_table import HudiTable
from catalog.plan.aggregates import UNANSWERED
from tests.support.servers import identifier, serving_tables

COW = "sample_table/cow/v9_txns_simple_meta"  # Hudi-written (parquet-mr), partitioned by region
MOR = "sample_table/mor/avro/v9_txns_simple_meta"  # the same, merge-on-read
MOR_LOGS = "sample_table/mor/parquet/v6_nonpartitioned"  # its latest slices have log files
FLOATS = "sample_table/cow/v6_nonpartitioned"  # floatField, doubleField
AGGREGATES = [["count", "*"], ["count", "merchant_name"], ["min", "txn_id"], ["max", "txn_id"], ["min", "amount"],
              ["max", "txn_ts"], ["min", "txn_date"], ["max", "is_international"], ["min", "_hoodie_commit_time"]]


@pytest.fixture(scope="module")
def paths(fixture_table) -> dict[str, str]:
    return {identifier(name): fixture_table(name) for name in (COW, MOR, MOR_LOGS, FLOATS)}


@pytest.fixture(scope="module")
def client(paths, tmp_path_factory):
    with serving_tables(paths, str(tmp_path_factory.mktemp("state"))) as srv:
        with flight.connect(f"grpc://127.0.0.1:{srv.port}") as c:
            yield c


def _command(**doc) -> flight.FlightDescriptor:
    return flight.FlightDescriptor.for_command(json.dumps(doc))


def _expected(rows: pa.Table, aggregates: list[list[str]]) -> dict:
    out = {}
    for function, column in aggregates:
        if column == "*":
            out[f"count({column})"] = rows.num_rows
        else:
            kernel = {"count": pc.count, "min": pc.min, "max": pc.max}[function]
            out[f"{function}({column})"] = kernel(rows.column(column)).as_py()
    return out


@pytest.mark.parametrize("name, options", [
    (COW, {}),
    (COW, {"filters": [["region", "=", "us"]]}),  # the statistics decide every row group
    (COW, {"as_of": "first"}),
    (MOR, {}),  # compacted: its latest slices are base files only
    (MOR, {"query_type": "read_optimized"}),
])
def test_aggregates_are_answered_from_metadata(client, paths, name, options):
    table = HudiTable.open(paths[identifier(name)])
    if options.get("as_of") == "first":
        options = {"as_of": table.timeline.commits[0].requested_time}
    filters = [tuple(f) for f in options.get("filters", [])]
    expected = _expected(table.read(**{**options, "filters": filters}), AGGREGATES)
    descriptor = _command(table=identifier(name), aggregates=AGGREGATES, **options)
    info = client.get_flight_info(descriptor)
    assert json.loads(info.app_metadata) == {"aggregates": "metadata"}
    assert info.total_records == 1 and len(info.endpoints) == 1
    assert info.schema.names == list(expected)
    assert client.get_schema(descriptor).schema == info.schema
    schema = table.schema
    for function, column in AGGREGATES:
        field = info.schema.field(f"{function}({column})")
        if function == "count":
            assert field.type == pa.int64() and not field.nullable
        else:
            assert field.type == schema.field(column).type and field.nullable
    got = client.do_get(info.endpoints[0].ticket).read_all()
    assert got.num_rows == 1 and got.schema == info.schema
    assert got.to_pylist()[0] == expected


def test_no_rows_count_zero_and_min_null(client, paths):
    descriptor = _command(table=identifier(COW), aggregates=[["count", "*"], ["max", "txn_id"]],
                          filters=[["region", "=", "nowhere"]])
    info = client.get_flight_info(descriptor)
    assert client.do_get(info.endpoints[0].ticket).read_all().to_pylist() == [{"count(*)": 0, "max(txn_id)": None}]


@pytest.mark.parametrize("name, options, reason", [
    (MOR_LOGS, {}, "log files"),  # the merge decides which rows there are
    (COW, {"filters": [["amount", ">", 100]]}, "decide a filter on 'amount'"),  # a decimal filter
    (COW, {"filters": [["txn_id", "!=", "TXN-013"]]}, "do not prove"),  # rows on both sides in a row group
])
def test_what_metadata_does_not_decide_is_unimplemented_with_the_reason(client, name, options, reason):
    with pytest.raises(pa.ArrowNotImplementedError, match=f"^{UNANSWERED}.*{reason}"):
        client.get_flight_info(_command(table=identifier(name), aggregates=[["count", "*"]], **options))


@pytest.mark.parametrize("column", ["floatField", "doubleField"])
def test_floating_point_min_max_is_unimplemented(client, paths, column):
    with pytest.raises(pa.ArrowNotImplementedError, match=f"{column}.*floating point"):
        client.get_flight_info(_command(table=identifier(FLOATS), aggregates=[["count", "*"], ["max", column]]))
    info = client.get_flight_info(_command(table=identifier(FLOATS), aggregates=[["count", column]]))
    rows = HudiTable.open(paths[identifier(FLOATS)]).read(columns=[column])
    assert client.do_get(info.endpoints[0].ticket).read_all().to_pylist() == [
        {f"count({column})": pc.count(rows.column(column)).as_py()}]


@pytest.mark.parametrize("extra, message", [
    ({"limit": 3}, "limit"),
    ({"columns": ["txn_id"]}, "columns"),
    ({"query_type": "incremental", "start": "20200101000000000"}, "incremental"),
    ({"query_type": "cdc", "start": "20200101000000000"}, "cdc"),
    ({"aggregates": [["sum", "amount"]]}, "aggregates/0"),
    ({"aggregates": [["min", "*"]]}, r"'\*' is for count only"),
    ({"aggregates": [["max", "nope"]]}, "'nope'"),
    ({"aggregates": []}, "aggregates"),
])
def test_options_aggregates_do_not_take_are_invalid(client, extra, message):
    command = {"table": identifier(COW), "aggregates": [["count", "*"]], **extra}
    with pytest.raises(pa.ArrowInvalid, match=message):
        client.get_flight_info(flight.FlightDescriptor.for_command(json.dumps(command)))


def test_a_metadata_table_takes_no_aggregates(client):
    with pytest.raises(pa.ArrowInvalid, match="'aggregates' does not apply to the metadata table"):
        client.get_flight_info(_command(table=identifier(COW) + "$timeline", aggregates=[["count", "*"]]))
