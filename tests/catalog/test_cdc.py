"""CDC queries (``query_type="cdc"``) against Spark's Hudi CDC query on tables Hudi wrote
(``tests/data/tables``): the library, the Flight service (JSON commands, one endpoint per file
group) and Flight SQL (``hudi_table_changes(..., 'cdc', ...)``) return Spark's rows.

The JSON images are compared character for character on the tables of releases whose Spark
CDC query writes them as we do, Hudi 1.1 and later. Hudi 0.15 and 1.0 put the fields of images
read from file slices in a Scala hash map (their order is the map's) and write merge-on-read log
records with Avro's ``toString`` (null fields included); there the images are compared as JSON
objects without their null fields.

Hudi 1.0.2's Spark CDC iterator drops a row now and then (its ``hasNext`` has side effects,
apache/hudi#14016, fixed in 1.1): there Spark's rows must be ours less at most one.
"""

from __future__ import annotations

import json
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import adbc_driver_flightsql.dbapi as adbc
import pyarrow as pa
import pyarrow.flight as flight
import pytest

from catalog import HudiTable, InvalidQueryError, ReadOptions, UnsupportedTableError
from catalog.plan.options import resolve
from tests.data.factory.archive import Query, read_result
from tests.support.compare import cdc_rows
from tests.support.servers import serving_tables
from tests.support.written import WrittenTable, written_tables

#: releases whose Spark CDC query writes image fields in schema order
SCHEMA_ORDER_RELEASES = ("1.1.1", "1.2.0")
#: releases whose Spark CDC query loses rows (apache/hudi#14016)
LOSSY_RELEASES = ("1.0.2",)
CDC_TABLES = [t for t in written_tables() if "cdc" in t.manifest().features]
#: CDC tables whose data files leave the partition columns out: we refuse their CDC queries (Hudi's
#: images leave the columns out of base-file inserts and null in logged images)
DROPPED_PARTITION_COLUMNS = [t for t in CDC_TABLES if "drop_partition_columns" in t.manifest().features]
ENABLED = [t for t in CDC_TABLES if "cdc_disabled" not in t.manifest().features and t not in DROPPED_PARTITION_COLUMNS]
ANSWERED = [(t, q) for t in ENABLED for q in t.manifest().queries if q.query_type == "cdc" and q.file]
REFUSED = [(t, q) for t in CDC_TABLES for q in t.manifest().queries if q.query_type == "cdc" and q.error]


def _id(case: tuple[WrittenTable, Query]) -> str:
    return f"{case[0].key}:{case[1].name}"


def _kwargs(query: Query) -> dict[str, Any]:
    """``HudiTable.read`` arguments; Spark's ``000`` start (the beginning) is no start."""
    kwargs = query.read_kwargs()
    if kwargs.get("start", "").strip("0") == "":
        kwargs.pop("start", None)
    return kwargs


def assert_same_changes(ours: pa.Table, theirs: pa.Table, release: str, what: str) -> None:
    assert ours.schema.names == ["op", "ts_ms", "before", "after"], what
    exact = release in SCHEMA_ORDER_RELEASES
    got, want = cdc_rows(ours, exact), cdc_rows(theirs, exact)
    if release in LOSSY_RELEASES:
        assert not want - got and sum((got - want).values()) <= 1, f"{what}: ours only {got - want}, Spark only {want - got}"
        return
    assert got == want, f"{what}: ours only {got - want}, Spark only {want - got}"


def test_the_cdc_tables_cover_every_logging_mode_and_inference_case():
    modes = {(t.manifest().table_type, t.name.rsplit("_cdc_", 1)[-1]) for t in ENABLED}
    for table_type in ("COPY_ON_WRITE", "MERGE_ON_READ"):
        assert {(table_type, m) for m in ("op_key_only", "data_before", "data_before_after")} <= modes
    assert any("insert_overwrite" in t.manifest().features for t in ENABLED)
    assert any("cdc_disabled" in t.manifest().features for t in CDC_TABLES)
    ops = Counter(op for t, q in ANSWERED for op in read_result(t.expected, q).column("op").to_pylist())
    assert ops["i"] and ops["u"] and ops["d"], ops


@pytest.mark.parametrize("case", ANSWERED, ids=_id)
def test_cdc_read_equals_spark(written_table, case):
    table, query = case
    ours = HudiTable.open(written_table(table)).read(**_kwargs(query))
    assert_same_changes(ours, read_result(table.expected, query), table.release, f"{table.key} {query.name}")


@pytest.mark.parametrize("case", REFUSED, ids=_id)
def test_what_spark_refuses_is_refused_by_name(written_table, case):
    table, query = case
    with pytest.raises(UnsupportedTableError, match="not a CDC table"):
        HudiTable.open(written_table(table)).read(**_kwargs(query))


def test_columns_filters_and_limit_apply_to_the_cdc_columns(written_table):
    table = next(t for t in ENABLED if t.key == "1.2.0/mor_cdc_op_key_only")
    hudi = HudiTable.open(written_table(table))
    everything = hudi.read(query_type="cdc")
    deletes = hudi.read(query_type="cdc", columns=["before", "op"], filters=[("op", "=", "d")])
    assert deletes.schema.names == ["before", "op"]
    expected = [(r["before"], "d") for r in everything.to_pylist() if r["op"] == "d"]
    assert sorted((r["before"], r["op"]) for r in deletes.to_pylist()) == sorted(expected) and expected
    assert hudi.read(query_type="cdc", limit=2).num_rows == 2
    with pytest.raises(InvalidQueryError, match="not in the table schema"):
        hudi.read(query_type="cdc", columns=["id"])


def test_cdc_range_is_by_requested_time(written_table):
    """A start equal to a commit's requested time leaves that commit out, whatever the table version."""
    table = next(t for t in ENABLED if t.key == "1.2.0/cow_cdc_data_before_after")
    hudi = HudiTable.open(written_table(table))
    commits = hudi.timeline.commits
    after_first = hudi.read(query_type="cdc", start=commits[0].requested_time)
    assert commits[0].requested_time not in after_first.column("ts_ms").to_pylist()
    assert set(after_first.column("ts_ms").to_pylist()) == {c.requested_time for c in commits[1:]}


def test_a_range_reaching_archived_commits_is_refused(written_table):
    """Hudi's CDC query reads the active timeline only; we refuse rather than leave commits out."""
    table = next(t for t in written_tables() if t.key == "1.2.0/cow_clean_archive")
    timeline = HudiTable.open(written_table(table)).timeline
    assert timeline.archived_commits
    with pytest.raises(UnsupportedTableError, match="reaches archived commits"):
        resolve(ReadOptions(query_type="cdc"), timeline)
    active = resolve(ReadOptions(query_type="cdc", start=timeline.start), timeline)
    assert active.incremental_instants == tuple(c.requested_time for c in timeline.commits if c.requested_time > timeline.start)


# -- served: Flight JSON commands and Flight SQL ------------------------------------------------


#: the widest stored range of each CDC table (from the beginning to the last commit)
WIDEST = [
    (t, max((q for q in t.manifest().queries if q.query_type == "cdc" and q.file), key=lambda q: q.rows))
    for t in ENABLED
]


@pytest.fixture(scope="module")
def cdc_server(written_table, tmp_path_factory):
    tables = {t.identifier: written_table(t) for t in CDC_TABLES}
    with serving_tables(tables, str(tmp_path_factory.mktemp("cdc-state")), split_cache_bytes=1 << 24) as srv:
        yield srv


def _flight_cdc(server, table: WrittenTable, query: Query) -> tuple[pa.Table, int]:
    command = {"table": table.identifier, **_kwargs(query)}
    with flight.connect(f"grpc://127.0.0.1:{server.port}") as client:
        info = client.get_flight_info(flight.FlightDescriptor.for_command(json.dumps(command)))
        with ThreadPoolExecutor(4) as pool:
            parts = list(pool.map(lambda ep: client.do_get(ep.ticket).read_all(), info.endpoints))
    return (pa.concat_tables(parts) if parts else info.schema.empty_table()), len(info.endpoints)


@pytest.mark.parametrize("case", WIDEST, ids=_id)
def test_flight_cdc_endpoints_equal_spark(cdc_server, case):
    table, query = case
    theirs = read_result(table.expected, query)
    ours, endpoints = _flight_cdc(cdc_server, table, query)
    assert_same_changes(ours, theirs, table.release, f"flight {table.key} {query.name}")
    assert endpoints > 1  # one endpoint per changed file group
    again, _ = _flight_cdc(cdc_server, table, query)  # the second read comes from the split-result cache
    assert_same_changes(again, theirs, table.release, f"flight (cached) {table.key} {query.name}")


@pytest.mark.parametrize("case", WIDEST, ids=_id)
def test_flight_sql_table_changes_equal_spark(cdc_server, case):
    table, query = case
    end = f", '{query.end}'" if query.end else ""
    start = "earliest" if "start" not in _kwargs(query) else query.start
    with adbc.connect(f"grpc://127.0.0.1:{cdc_server.port}", autocommit=True) as conn, conn.cursor() as cursor:
        cursor.execute(f"SELECT * FROM hudi_table_changes('{table.identifier}', 'cdc', '{start}'{end})")
        ours = cursor.fetch_arrow_table()
        cursor.execute(
            f"SELECT op, count(*) AS n FROM hudi_table_changes('{table.identifier}', 'cdc', '{start}'{end}) "
            "GROUP BY op"
        )
        counts = {r["op"]: r["n"] for r in cursor.fetch_arrow_table().to_pylist()}
    theirs = read_result(table.expected, query)
    assert_same_changes(ours, theirs, table.release, f"flight sql {table.key} {query.name}")
    assert counts == dict(Counter(ours.column("op").to_pylist()))  # the aggregate runs on the same rows


def test_served_cdc_refusal_names_the_table(cdc_server):
    disabled = next(t for t in CDC_TABLES if "cdc_disabled" in t.manifest().features)
    command = {"table": disabled.identifier, "query_type": "cdc"}
    with flight.connect(f"grpc://127.0.0.1:{cdc_server.port}") as client:
        with pytest.raises(pa.ArrowNotImplementedError, match="not a CDC table") as err:  # Flight UNIMPLEMENTED
            client.get_flight_info(flight.FlightDescriptor.for_command(json.dumps(command)))
    assert f"table {disabled.identifier} is not a CDC table" in str(err.value)  # the name it is served as


DROPPED_REFUSAL = "partition columns out of the data files"


@pytest.mark.parametrize("table", DROPPED_PARTITION_COLUMNS, ids=lambda t: t.key)
def test_cdc_of_dropped_partition_columns_is_refused_by_name(cdc_server, written_table, table):
    """Hudi answers these tables' CDC queries with the partition column left out of some images
    (base-file inserts) and null in others (logged images), filled in yet others (merge-on-read):
    the stored answers say so. We refuse by name, in the library, through Flight and Flight SQL."""
    answered = [read_result(table.expected, q) for q in table.manifest().queries if q.query_type == "cdc" and q.file]
    images = [json.loads(i) for t in answered for i in t.column("after").to_pylist() if i not in (None, "null")]
    assert images and any(image.get("part") is None for image in images)
    with pytest.raises(UnsupportedTableError, match=DROPPED_REFUSAL):
        HudiTable.open(written_table(table)).read(query_type="cdc")
    command = {"table": table.identifier, "query_type": "cdc"}
    with flight.connect(f"grpc://127.0.0.1:{cdc_server.port}") as client:
        with pytest.raises(pa.ArrowNotImplementedError, match=DROPPED_REFUSAL):
            client.get_flight_info(flight.FlightDescriptor.for_command(json.dumps(command)))
    with adbc.connect(f"grpc://127.0.0.1:{cdc_server.port}", autocommit=True) as conn, conn.cursor() as cursor:
        with pytest.raises(Exception, match=DROPPED_REFUSAL):
            cursor.execute(f"SELECT * FROM hudi_table_changes('{table.identifier}', 'cdc', 'earliest')")
            cursor.fetch_arrow_table()
