"""Never a silent wrong answer in SQL: a table clause the rewrite does not carry is refused by
name (it used to be dropped: TABLESAMPLE returned every row, ``AT (...)`` the latest snapshot),
``AT (TIMESTAMP => ...)`` is time travel, impossible instants and NaN parameters are refused."""

from __future__ import annotations

import adbc_driver_manager
import pyarrow as pa
import pytest

from catalog.hudi_table import HudiTable
from tests.support.compare import assert_same_rows

MOR = "sample_table_mor_avro.v9_txns_simple_meta"
COW = "sample_table_cow.v6_nonpartitioned"


def _query(cursor, sql: str, parameters=None) -> pa.Table:
    cursor.execute(sql, parameters)
    return cursor.fetch_arrow_table()


@pytest.mark.parametrize("clause, named", [
    ("TABLESAMPLE (10 PERCENT)", "TABLESAMPLE"),
    ("AS x TABLESAMPLE 5", "TABLESAMPLE"),
    ("AS x(a, b)", "column aliases"),
    ("PIVOT (sum(amount) FOR region IN ('x'))", "PIVOT"),
    ("UNPIVOT (v FOR k IN (amount, txn_id))", "PIVOT"),
    ("WITH (NOLOCK)", "table hints"),
    ("AT (OFFSET => -5)", r"AT \(TIMESTAMP"),
    ("BEFORE (STATEMENT => 'x')", r"AT \(TIMESTAMP"),
    ("TIMESTAMP AS OF '2024-01-01 25:61:61'", "malformed .*(must be in|out of range)"),
    ("TIMESTAMP AS OF '20241301000000000'", "malformed .*(must be in|out of range)"),
    ("TIMESTAMP AS OF 'yesterday'", "malformed .*expected yyyyMMddHHmmssSSS"),
    ("AT (TIMESTAMP => '2024-02-30')", "malformed .*(must be in|out of range)"),
])
def test_uncarried_clauses_are_refused_by_name(cursor, clause, named):
    with pytest.raises(adbc_driver_manager.Error, match=named):
        _query(cursor, f"SELECT * FROM {MOR} {clause}")


def test_changes_with_an_impossible_instant_is_refused(cursor):
    with pytest.raises(adbc_driver_manager.Error, match="malformed .*must be in"):
        _query(cursor, f"SELECT * FROM hudi_table_changes('{MOR}', 'latest_state', '2024-01-01 24:00:00')")


def test_the_initial_instant_still_starts_an_incremental_read(cursor, sql_tables):
    table = HudiTable.open(sql_tables[1][MOR])
    rows = _query(cursor, f"SELECT * FROM hudi_table_changes('{MOR}', 'latest_state', '00000000000000')")
    assert rows.num_rows == table.read().num_rows


def test_at_timestamp_is_time_travel(cursor, sql_tables):
    table = HudiTable.open(sql_tables[1][MOR])
    instant = table.timeline.commits[3].requested_time
    expected = table.read(as_of=instant)
    assert expected.num_rows != table.read().num_rows
    assert_same_rows(_query(cursor, f"SELECT * FROM {MOR} AT (TIMESTAMP => '{instant}')"), expected, exact_types=True)


def test_using_sample_is_carried(cursor):
    assert _query(cursor, f"SELECT * FROM {COW} USING SAMPLE 1 ROWS").num_rows == 1
    counted = _query(cursor, f"SELECT count(*) AS n FROM {COW} USING SAMPLE 1 ROWS")
    assert counted.column("n").to_pylist() == [1]


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_nan_parameters_are_refused(cursor, value):
    with pytest.raises(adbc_driver_manager.Error, match="NaN and infinite"):
        _query(cursor, f"SELECT * FROM {COW} WHERE ? IS NULL", parameters=(value,))


def test_clauses_on_ctes_still_reach_the_engine(cursor):
    rows = _query(cursor, f"WITH c AS (SELECT * FROM {COW}) SELECT * FROM c USING SAMPLE 1 ROWS")
    assert rows.num_rows == 1
