"""Filtered reads of the factory's tables whose files the planner prunes by statistics: column
stats limited to a column list, expression indexes, no metadata table (or one a later write
deleted), several file groups per partition, several row groups per file, clustering along a
space-filling curve. Each filter's answer is exactly Hudi's snapshot rows that match it, whatever
the planner left out, through the library and through Flight SQL."""

from __future__ import annotations

import adbc_driver_flightsql.dbapi as adbc
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from catalog import HudiTable
from tests.data.factory.archive import read_result
from tests.support.compare import assert_same_rows
from tests.support.servers import serving_tables
from tests.support.written import WrittenTable, written_tables

#: table features whose tables are filtered here (``storage_specs``)
PRUNED_FEATURES = {"column_stats", "expression_index", "no_metadata_table", "metadata_table_dropped", "file_sizing",
                   "row_groups", "layout_optimize"}
TABLES = [t for t in written_tables() if PRUNED_FEATURES & set(t.manifest().features)
          and any(q.name == "snapshot" and q.file for q in t.manifest().queries)]
#: (column, operator, value) filters on indexed and unindexed columns (ranges, equality, sets), and
#: the SQL of each
FILTERS = [(("price", ">", 12.0), "price > 12.0"), (("ts", "<=", 2010), "ts <= 2010"),
           (("name", "=", "name9_v2"), "name = 'name9_v2'"), (("part", "in", ["p0", "p2"]), "part IN ('p0', 'p2')"),
           (("id", "<", "id005"), "id < 'id005'")]
_COMPARE = {">": pc.greater, "<=": pc.less_equal, "=": pc.equal, "<": pc.less}


def _matching(rows: pa.Table, column: str, op: str, value) -> pa.Table:
    if op == "in":
        return rows.filter(pc.is_in(rows[column], pa.array(value)))
    return rows.filter(_COMPARE[op](rows[column], value))


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.key)
@pytest.mark.parametrize(("condition", "sql"), FILTERS, ids=[sql for _, sql in FILTERS])
def test_filtered_read_equals_hudi_snapshot_filtered(written_table, table: WrittenTable, condition, sql):
    snapshot = read_result(table.expected, next(q for q in table.manifest().queries if q.name == "snapshot"))
    expected = _matching(snapshot, *condition)
    ours = HudiTable.open(written_table(table)).read(filters=[condition])
    assert_same_rows(ours, expected.select(ours.column_names), f"{table.key} {condition}")


@pytest.fixture(scope="module")
def filtered_server(written_table, tmp_path_factory):
    with serving_tables({t.identifier: written_table(t) for t in TABLES},
                        str(tmp_path_factory.mktemp("filtered-state"))) as server:
        yield server


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.key)
@pytest.mark.parametrize(("condition", "sql"), FILTERS, ids=[sql for _, sql in FILTERS])
def test_flight_sql_where_equals_hudi_snapshot_filtered(filtered_server, table: WrittenTable, condition, sql):
    snapshot = read_result(table.expected, next(q for q in table.manifest().queries if q.name == "snapshot"))
    expected = _matching(snapshot, *condition)
    with adbc.connect(f"grpc://127.0.0.1:{filtered_server.port}", autocommit=True) as conn, conn.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {table.identifier} WHERE {sql}")
        served = cursor.fetch_arrow_table()
    assert_same_rows(served, expected.select(served.column_names), f"flight sql {table.key} {sql}")


def test_the_filtered_tables_are_there():
    assert {"1.0.2/cow_expression_index", "1.2.0/cow_column_stats_columns", "0.15.0/cow_no_metadata",
            "1.2.0/cow_row_groups"} <= {t.key for t in TABLES}
