"""Flight SQL through the real ADBC driver (``adbc_driver_flightsql.dbapi``): catalog objects,
SQL info, statements, parameters, partitions, time travel, incremental reads, joins and
aggregates, each compared with ``HudiTable.read`` of the same table."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as flight
import pytest

from catalog.hudi_table import HudiTable
from tests.support.compare import assert_same_rows
from tests.support.fixtures import all_table_names
from tests.support.servers import identifier

COW = "sample_table_cow.v6_nonpartitioned"
COW_TXNS = "sample_table_cow.v9_txns_simple_meta"
MOR_TXNS = "sample_table_mor_avro.v9_txns_simple_meta"
MOR = "sample_table_mor_parquet.v6_nonpartitioned"
TRIPS = "quickstart_trips_table_mor_avro.v8_trips_8i3u1d"


def _table(sql_tables, identifier: str) -> HudiTable:
    return HudiTable.open(sql_tables[1][identifier])


def _query(cursor, sql: str, parameters=None) -> pa.Table:
    cursor.execute(sql, parameters)
    return cursor.fetch_arrow_table()


# -- catalog objects and info ------------------------------------------------------------------


def test_get_objects_lists_catalog_schemas_tables_and_columns(adbc_conn, sql_tables):
    objects = adbc_conn.adbc_get_objects().read_all().to_pylist()
    assert [c["catalog_name"] for c in objects] == ["hudi"]
    schemas = {s["db_schema_name"]: s for s in objects[0]["catalog_db_schemas"]}
    identifiers = sql_tables[1]
    assert set(schemas) == {i.split(".")[0] for i in identifiers}
    tables = {t["table_name"]: t for t in schemas["sample_table_mor_parquet"]["db_schema_tables"]}
    assert "v6_nonpartitioned" in tables and "v6_nonpartitioned_ro" in tables  # MOR: also its _ro view
    cow_tables = {t["table_name"] for t in schemas["sample_table_cow"]["db_schema_tables"]}
    assert "v6_nonpartitioned" in cow_tables and "v6_nonpartitioned_ro" not in cow_tables
    columns = [c["column_name"] for c in tables["v6_nonpartitioned"]["table_columns"]]
    assert columns == _table(sql_tables, MOR).schema.names
    assert {t["table_type"] for t in tables.values()} == {"table"}


def test_get_objects_filters(adbc_conn):
    objects = adbc_conn.adbc_get_objects(depth="tables", db_schema_filter="sample_table_cow",
                                         table_name_filter="v6_%").read_all().to_pylist()
    schemas = objects[0]["catalog_db_schemas"]
    assert [s["db_schema_name"] for s in schemas] == ["sample_table_cow"]
    names = {t["table_name"] for t in schemas[0]["db_schema_tables"]}
    assert names and all(n.startswith("v6_") for n in names)
    none = adbc_conn.adbc_get_objects(depth="tables", table_types_filter=["VIEW"]).read_all().to_pylist()
    assert all(not s["db_schema_tables"] for c in none for s in c["catalog_db_schemas"] or [])


def test_get_table_schema_and_types(adbc_conn, sql_tables):
    schema = adbc_conn.adbc_get_table_schema("v9_txns_simple_meta", db_schema_filter="sample_table_cow")
    assert schema.names == _table(sql_tables, COW_TXNS).schema.names
    assert adbc_conn.adbc_get_table_types() == ["table"]


def test_get_info(adbc_conn):
    info = adbc_conn.adbc_get_info()
    assert info["vendor_name"] == "hudi-flight"
    assert info["vendor_arrow_version"] == pa.__version__
    assert info["vendor_version"]


# -- statements --------------------------------------------------------------------------------


@pytest.mark.parametrize("identifier", [COW, COW_TXNS, MOR, MOR_TXNS, TRIPS])
def test_select_star_equals_read(cursor, sql_tables, identifier):
    assert_same_rows(_query(cursor, f"SELECT * FROM {identifier}"), _table(sql_tables, identifier).read(),
                     exact_types=True)


@pytest.mark.parametrize("identifier", [MOR, MOR_TXNS])
def test_read_optimized_view(cursor, sql_tables, identifier):
    ours = _query(cursor, f"SELECT * FROM {identifier}_ro")
    assert_same_rows(ours, _table(sql_tables, identifier).read(query_type="read_optimized"), exact_types=True)


def test_projection_filter_limit_pushed(cursor, sql_tables):
    ours = _query(cursor, f"SELECT txn_id, amount FROM {COW_TXNS} WHERE region = 'us' AND amount > 10")
    expected = _table(sql_tables, COW_TXNS).read(columns=["txn_id", "amount"],
                                                 filters=[("region", "=", "us"), ("amount", ">", 10)])
    assert_same_rows(ours, expected, exact_types=True)
    limited = _query(cursor, f"SELECT txn_id FROM {COW_TXNS} LIMIT 3")
    assert limited.num_rows == 3


def test_bound_parameters(cursor, sql_tables):
    ours = _query(cursor, f"SELECT txn_id, region FROM {MOR_TXNS} WHERE region = ? AND txn_id <> ?", ("us", "x"))
    expected = _table(sql_tables, MOR_TXNS).read(columns=["txn_id", "region"], filters=[("region", "=", "us")])
    assert ours.num_rows > 0
    assert_same_rows(ours, expected, exact_types=True)
    again = _query(cursor, f"SELECT count(*) AS n FROM {MOR_TXNS} WHERE region = ?", ("none",))
    assert again.column("n").to_pylist() == [0]


def test_partitions_are_the_json_paths_endpoints(cursor, sql_server, sql_tables):
    partitions, schema = cursor.adbc_execute_partitions(f"SELECT * FROM {COW_TXNS}")
    client = flight.connect(f"grpc://127.0.0.1:{sql_server.port}")
    try:
        info = client.get_flight_info(flight.FlightDescriptor.for_path(*COW_TXNS.split(".")))
    finally:
        client.close()
    assert len(partitions) == len(info.endpoints) > 1
    assert schema == info.schema
    parts = []
    for partition in partitions:
        cursor.adbc_read_partition(partition)
        parts.append(cursor.fetch_arrow_table())
    assert_same_rows(pa.concat_tables(parts), _table(sql_tables, COW_TXNS).read(), exact_types=True)


# -- time travel and incremental ---------------------------------------------------------------


@pytest.mark.parametrize("clause", ["TIMESTAMP AS OF", "FOR SYSTEM_TIME AS OF"])
def test_time_travel(cursor, sql_tables, clause):
    table = _table(sql_tables, MOR_TXNS)
    instant = table.timeline.commits[3].requested_time
    ours = _query(cursor, f"SELECT * FROM {MOR_TXNS} {clause} '{instant}'")
    expected = table.read(as_of=instant)
    assert expected.num_rows != table.read().num_rows or expected.num_rows > 0
    assert_same_rows(ours, expected, exact_types=True)


def test_time_travel_takes_the_one_instant_grammar(cursor, sql_tables):
    """ISO dates and timestamps, with or without a zone, as everywhere else (docs/reading.md)."""
    table = _table(sql_tables, MOR_TXNS)
    instant = table.timeline.commits[3].requested_time
    iso = f"{instant[:4]}-{instant[4:6]}-{instant[6:8]} {instant[8:10]}:{instant[10:12]}:{instant[12:14]}.{instant[14:]}"
    for form in (iso, iso.replace(" ", "T") + "Z"):
        ours = _query(cursor, f"SELECT * FROM {MOR_TXNS} TIMESTAMP AS OF '{form}'")
        assert_same_rows(ours, table.read(as_of=form), exact_types=True)
    assert_same_rows(_query(cursor, f"SELECT * FROM {MOR_TXNS} TIMESTAMP AS OF '{iso}'"),
                     table.read(as_of=instant), exact_types=True)
    with pytest.raises(Exception, match="malformed TIMESTAMP AS OF '2024-13-01'.*expected yyyyMMddHHmmssSSS"):
        _query(cursor, f"SELECT * FROM {MOR_TXNS} TIMESTAMP AS OF '2024-13-01'")


def test_time_travel_in_a_join(cursor, sql_tables):
    table = _table(sql_tables, COW_TXNS)
    old = table.timeline.commits[1].requested_time
    ours = _query(cursor, f"SELECT a.txn_id FROM {COW_TXNS} TIMESTAMP AS OF '{old}' a "
                          f"JOIN {COW_TXNS} b ON a.txn_id = b.txn_id")
    expected = set(table.read(as_of=old).column("txn_id").to_pylist()) & set(table.read().column("txn_id").to_pylist())
    assert sorted(ours.column("txn_id").to_pylist()) == sorted(expected)


@pytest.mark.parametrize("end", [None, 8])
def test_incremental(cursor, sql_tables, end):
    table = _table(sql_tables, MOR_TXNS)
    commits = [c.requested_time for c in table.timeline.commits]
    start = commits[2]
    stop = commits[end] if end is not None else None
    extra = f", '{stop}'" if stop else ""
    ours = _query(cursor, f"SELECT * FROM hudi_table_changes('{MOR_TXNS}', 'latest_state', '{start}'{extra})")
    expected = table.read(query_type="incremental", start=start, end=stop)
    assert expected.num_rows > 0
    assert_same_rows(ours, expected, exact_types=True)


# -- the engine --------------------------------------------------------------------------------


def _duckdb(sql: str, **tables: pa.Table) -> pa.Table:
    db = duckdb.connect()
    for name, value in tables.items():
        db.register(name, value)
    return db.sql(sql).to_arrow_table()


def test_aggregate_equals_duckdb_over_read(cursor, sql_tables):
    sql = "SELECT region, count(*) AS n, sum(amount) AS total FROM {} GROUP BY region ORDER BY region"
    ours = _query(cursor, sql.format(MOR_TXNS))
    expected = _duckdb(sql.format("t"), t=_table(sql_tables, MOR_TXNS).read())
    assert ours.to_pylist() == expected.to_pylist()


def test_join_equals_duckdb_over_read(cursor, sql_tables):
    sql = ("SELECT c.txn_id, c.amount, m.amount AS mor_amount FROM {} c JOIN {} m ON c.txn_id = m.txn_id "
           "WHERE c.amount > 0 ORDER BY c.txn_id")
    ours = _query(cursor, sql.format(COW_TXNS, MOR_TXNS))
    expected = _duckdb(sql.format("cow", "mor"), cow=_table(sql_tables, COW_TXNS).read(),
                       mor=_table(sql_tables, MOR_TXNS).read())
    assert ours.num_rows > 0 and ours.to_pylist() == expected.to_pylist()


def test_cte_subquery_and_window(cursor, sql_tables):
    sql = ("WITH t AS (SELECT txn_id, region, amount FROM {0}) "
           "SELECT txn_id, rank() OVER (PARTITION BY region ORDER BY amount DESC, txn_id) AS r FROM t "
           "WHERE amount >= (SELECT avg(amount) FROM {0}) ORDER BY txn_id")
    ours = _query(cursor, sql.format(COW_TXNS))
    table = _table(sql_tables, COW_TXNS).read()
    expected = _duckdb(sql.format("src"), src=table)
    assert ours.to_pylist() == expected.to_pylist()


def test_count_star_from_metadata_equals_count(cursor, sql_tables, sql_server):
    for ref in (COW_TXNS, COW, f"{MOR}_ro", MOR_TXNS, TRIPS):
        name = ref.removesuffix("_ro")
        options = {"query_type": "read_optimized"} if ref.endswith("_ro") else {}
        ours = _query(cursor, f"SELECT count(*) FROM {ref}")
        assert ours.column(0).to_pylist() == [_table(sql_tables, name).read(**options).num_rows], ref
    # a COW snapshot is counted from the footers: one endpoint whose ticket is a count ticket
    client = flight.connect(f"grpc://127.0.0.1:{sql_server.port}")
    try:
        from flight_server.protocol import pack, sql, unpack

        info = client.get_flight_info(flight.FlightDescriptor.for_command(
            pack(sql.CommandStatementQuery(query=f"SELECT count(*) AS n FROM {COW_TXNS}"))))
        handle = unpack(info.endpoints[0].ticket.ticket).statement_handle
        assert sql_server.app.signer.verify(handle)["k"] == "count"
        assert client.do_get(info.endpoints[0].ticket).read_all().column("n").to_pylist() == [
            _table(sql_tables, COW_TXNS).read().num_rows]
    finally:
        client.close()


def test_engine_result_schema_matches_stream(cursor, sql_tables):
    cursor.execute(f"SELECT region, max(txn_ts) AS latest FROM {COW_TXNS} GROUP BY region")
    table = cursor.fetch_arrow_table()
    assert table.schema.names == ["region", "latest"]
    expected = pc.max(_table(sql_tables, COW_TXNS).read().column("txn_ts")).as_py()
    assert max(table.column("latest").to_pylist()) == expected


def test_parameters_bind_in_written_order(cursor, sql_tables):
    ours = _query(cursor, f"SELECT txn_id, ? AS tag FROM {COW_TXNS} WHERE region = ? ORDER BY txn_id LIMIT ?",
                  ("t", "us", 2))
    expected = sorted(_table(sql_tables, COW_TXNS).read(filters=[("region", "=", "us")]).column("txn_id").to_pylist())
    assert ours.column("txn_id").to_pylist() == expected[:2] and ours.column("tag").to_pylist() == ["t", "t"]


def test_select_without_tables(cursor):
    assert _query(cursor, "SELECT 1 + 1 AS two").to_pylist() == [{"two": 2}]


READABLE = all_table_names()  # Lance tables (Hudi 1.2) included


@pytest.mark.parametrize("name", READABLE)
def test_every_fixture_table_select_star_and_count(cursor, sql_tables, name):
    """Every readable fixture table through ADBC: ``SELECT *`` and ``count(*)`` (from the footers
    where that is exact, else counted) equal ``HudiTable.read``."""
    expected = HudiTable.open(sql_tables[1][identifier(name)]).read()
    assert_same_rows(_query(cursor, f"SELECT * FROM {identifier(name)}"), expected, exact_types=True)
    assert _query(cursor, f"SELECT count(*) FROM {identifier(name)}").column(0).to_pylist() == [expected.num_rows]


@pytest.mark.parametrize("name", [n for n in READABLE if "/mor/" in n])
def test_every_mor_fixture_table_read_optimized(cursor, sql_tables, name):
    expected = HudiTable.open(sql_tables[1][identifier(name)]).read(query_type="read_optimized")
    assert_same_rows(_query(cursor, f"SELECT * FROM {identifier(name)}_ro"), expected, exact_types=True)
    assert _query(cursor, f"SELECT count(*) FROM {identifier(name)}_ro").column(0).to_pylist() == [expected.num_rows]


@pytest.mark.parametrize("join", ["NATURAL JOIN {t} b", "JOIN {t} b USING (txn_id)"])
def test_natural_and_using_joins_see_every_column_they_join_on(cursor, sql_tables, join):
    """A projection pushed into a scan must keep the columns a NATURAL or USING join matches on."""
    sql = f"SELECT count(*) AS n FROM {COW_TXNS} a " + join.format(t=COW_TXNS)
    got = _query(cursor, sql).column(0).to_pylist()[0]
    con = duckdb.connect()
    con.register("t", _table(sql_tables, COW_TXNS).read())
    assert got == con.execute("SELECT count(*) FROM t a " + join.format(t="t")).fetchall()[0][0]
