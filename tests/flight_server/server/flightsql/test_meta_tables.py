"""Metadata tables over Flight SQL through the ADBC driver: ``ns."t$timeline"`` and its kin answer
exactly what ``HudiTable.metadata_table`` answers, take time travel where it means something,
join with the table's rows, and are described by an exact GetTables lookup but never listed."""

from __future__ import annotations

import tempfile

import adbc_driver_flightsql.dbapi as adbc
import pyarrow as pa
import pyarrow.flight as flight
import pytest

from catalog.hudi_table import HudiTable
from catalog.meta import META_TABLES
from catalog.meta.layout import FILE_GROUPS_SCHEMA
from flight_server.client.sql.flightsql import like_literal
from flight_server.protocol import pack, sql
from tests.support.servers import serving_tables

COW = "sample_table_cow.v9_txns_simple_meta"
MOR = "sample_table_mor_avro.v9_txns_simple_meta"
MOR_LOGS = "sample_table_mor_parquet.v6_nonpartitioned_rollback"


def _name(identifier: str, meta: str) -> str:
    namespace, table = identifier.split(".")
    return f'{namespace}."{table}${meta}"'


def _query(cursor, text: str, parameters=None) -> pa.Table:
    cursor.execute(text, parameters)
    return cursor.fetch_arrow_table()


def _library(sql_tables, identifier: str, meta: str, as_of: str | None = None) -> pa.Table:
    return HudiTable.open(sql_tables[1][identifier]).metadata_table(meta, as_of)


@pytest.mark.parametrize("identifier", [COW, MOR, MOR_LOGS])
@pytest.mark.parametrize("meta", ["timeline", "commits", "file_groups", "partitions", "properties", "indexes"])
def test_metadata_tables_answer_what_the_library_answers(cursor, sql_tables, identifier, meta):
    served = _query(cursor, f"SELECT * FROM {_name(identifier, meta)}")
    expected = _library(sql_tables, identifier, meta)
    assert served.column_names == expected.column_names
    assert served.to_pylist() == expected.to_pylist()


def test_time_travel_of_file_groups_and_commits(cursor, sql_tables):
    commits = _library(sql_tables, MOR, "commits").column("timestamp").to_pylist()
    as_of = commits[5]
    for meta in ("file_groups", "partitions", "commits"):
        served = _query(cursor, f"SELECT * FROM {_name(MOR, meta)} TIMESTAMP AS OF '{as_of}'")
        assert served.to_pylist() == _library(sql_tables, MOR, meta, as_of).to_pylist(), meta
    assert served.num_rows == 6


def test_a_metadata_table_joins_the_table_rows(cursor, sql_tables):
    counted = _query(
        cursor,
        f"SELECT f.base_file, f.base_file_rows, count(*) AS n FROM {_name(COW, 'file_groups')} f "
        f"JOIN {COW} r ON r._hoodie_file_name = f.base_file GROUP BY 1, 2",
    ).to_pylist()
    assert len(counted) == _library(sql_tables, COW, "file_groups").num_rows
    assert all(row["n"] == row["base_file_rows"] for row in counted)


def test_prepared_statements_and_aggregates_over_metadata_tables(cursor, sql_tables):
    timeline = _library(sql_tables, MOR, "timeline").to_pylist()
    chosen = timeline[3]["timestamp"]
    found = _query(cursor, f"SELECT action, state FROM {_name(MOR, 'timeline')} WHERE timestamp = ?", (chosen,))
    assert found.to_pylist() == [{"action": timeline[3]["action"], "state": "COMPLETED"}]
    counted = _query(cursor, f"SELECT count(*) AS n FROM {_name(MOR, 'timeline')}")
    assert counted.to_pylist() == [{"n": len(timeline)}]


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        (f"SELECT * FROM {_name(MOR, 'timeline')} TIMESTAMP AS OF '20260307162612542'",
         adbc.ProgrammingError, "time travel does not apply to the timeline metadata table"),
        (f"SELECT * FROM hudi_table_changes('{MOR}$commits', 'latest_state', 'earliest')",
         adbc.ProgrammingError, "queries read a table's rows, not its metadata table commits"),
        (f"SELECT * FROM {_name(MOR, 'snapshots')}", adbc.ProgrammingError, "not found"),
        (f"SELECT * FROM {_name(COW, 'file_groups')} TIMESTAMP AS OF '2000-01-01'",
         adbc.ProgrammingError, "before the table's first commit"),
    ],
)
def test_refusals_by_name(cursor, text, error, message):
    with pytest.raises(error, match=message):
        _query(cursor, text)


def test_describe_shows_the_metadata_table_columns(cursor):
    described = _query(cursor, f"DESCRIBE {_name(MOR, 'file_groups')}").to_pylist()
    assert [r["column_name"] for r in described] == FILE_GROUPS_SCHEMA.names
    assert {r["key"] for r in described} == {None}


def _get_tables(sql_server, **fields) -> list[dict]:
    client = flight.connect(f"grpc://127.0.0.1:{sql_server.port}")
    try:
        info = client.get_flight_info(flight.FlightDescriptor.for_command(pack(sql.CommandGetTables(**fields))))
        return client.do_get(info.endpoints[0].ticket).read_all().to_pylist()
    finally:
        client.close()


def test_get_tables_describes_an_exact_metadata_table_name_but_lists_none(sql_server):
    namespace, table = MOR.split(".")
    listed = _get_tables(sql_server, db_schema_filter_pattern=namespace)
    assert listed and not any("$" in row["table_name"] for row in listed)
    assert not _get_tables(sql_server, db_schema_filter_pattern=namespace, table_name_filter_pattern=f"{table}$%")
    (row,) = _get_tables(sql_server, db_schema_filter_pattern=namespace,
                         table_name_filter_pattern=like_literal(f"{table}$file_groups"), include_schema=True)
    assert row["table_name"] == f"{table}$file_groups"
    schema = pa.ipc.read_schema(pa.py_buffer(row["table_schema"]))
    assert schema.names == FILE_GROUPS_SCHEMA.names and schema.types == FILE_GROUPS_SCHEMA.types


def test_a_registered_table_of_that_name_wins(fixture_table):
    """``t$timeline`` names a metadata table only while no table of that very name is registered."""
    tables = {"ns.t": fixture_table("sample_table/cow/v6_nonpartitioned"),
              "ns.t$timeline": fixture_table("sample_table/cow/v9_txns_simple_meta")}
    with serving_tables(tables, tempfile.mkdtemp()) as server:
        with adbc.connect(f"grpc://127.0.0.1:{server.port}", autocommit=True) as conn, conn.cursor() as cur:
            rows = _query(cur, 'SELECT txn_id FROM ns."t$timeline"')
            commits = _query(cur, 'SELECT * FROM ns."t$commits"')
    assert rows.num_rows == HudiTable.open(tables["ns.t$timeline"]).read().num_rows
    assert commits.to_pylist() == HudiTable.open(tables["ns.t"]).metadata_table("commits").to_pylist()


def test_a_name_with_underscores_finds_its_metadata_table_as_a_like_pattern(sql_server, adbc_conn):
    """JDBC's getColumns and ADBC's adbc_get_table_schema pass the name as a LIKE pattern,
    unescaped: its ``_`` matches itself, so the metadata table of ``v9_txns_simple_meta`` is found."""
    namespace, table = MOR.split(".")
    (row,) = _get_tables(sql_server, db_schema_filter_pattern=namespace, table_name_filter_pattern=f"{table}$timeline")
    assert row["table_name"] == f"{table}$timeline"
    assert not _get_tables(sql_server, db_schema_filter_pattern=namespace, table_name_filter_pattern=f"{table}$t%")
    schema = adbc_conn.adbc_get_table_schema(f"{table}$timeline", db_schema_filter=namespace)
    assert schema.names == META_TABLES["timeline"].schema.names


def test_sqlalchemy_and_pandas_reflect_a_metadata_table(sql_server, sql_tables):
    import pandas as pd
    import sqlalchemy as sa

    namespace, table = MOR.split(".")
    engine = sa.create_engine(f"hudi+flight://127.0.0.1:{sql_server.port}")
    try:
        expected = _library(sql_tables, MOR, "timeline")
        columns = sa.inspect(engine).get_columns(f"{table}$timeline", schema=namespace)
        assert [c["name"] for c in columns] == expected.column_names
        with engine.connect() as conn:
            frame = pd.read_sql_table(f"{table}$timeline", conn, schema=namespace)
        assert list(frame.columns) == expected.column_names and len(frame) == expected.num_rows
    finally:
        engine.dispose()


def test_the_cli_reads_a_metadata_table_of_a_name_with_underscores(sql_server, sql_tables, tmp_path, capsys):
    import pyarrow.parquet as pq

    from flight_server.cli.main import main

    out = tmp_path / "timeline.parquet"
    uri = f"grpc://127.0.0.1:{sql_server.port}"
    assert main(["read", f"{MOR}$timeline", "--output", str(out), "--server", uri]) == 0, capsys.readouterr().err
    assert pq.read_table(out).equals(_library(sql_tables, MOR, "timeline"))
    assert main(["read", f"{MOR}$timeline", "--server", uri]) == 0
    assert f"({_library(sql_tables, MOR, 'timeline').num_rows} rows)" in capsys.readouterr().out
