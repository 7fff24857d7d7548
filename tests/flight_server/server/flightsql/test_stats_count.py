"""``SELECT count(*) ... WHERE`` is answered from column statistics only where they prove every
row of every planned row group matches; otherwise the engine counts, and both answers agree."""

from __future__ import annotations

import adbc_driver_flightsql.dbapi as adbc
import pytest

COW = "sample_table_cow.v9_txns_simple_meta"
MOR_WITH_LOGS = "sample_table_mor_parquet.v6_nonpartitioned"
ENGINE = " AND 1 = 1"  # a condition no scan carries: the engine counts the same rows


def _count(server, sql: str) -> int:
    with adbc.connect(f"grpc://127.0.0.1:{server.port}", autocommit=True) as conn, conn.cursor() as cursor:
        cursor.execute(sql)
        (value,) = cursor.fetch_arrow_table().column(0).to_pylist()
        return value


def _engine_runs(server) -> int:
    routes = server.app.flight_sql.statements.routes
    return routes.native + routes.streamed


@pytest.mark.parametrize(
    "where",
    [
        "region = 'us'",  # one value per file
        "region IN ('us', 'eu') AND txn_ts >= 1700000000000",
        "txn_ts > 0 AND is_international IS NOT NULL",
        "txn_ts <= 9999999999999 AND txn_ts < 9999999999999 AND txn_ts != 5",
        "NOT currency IN ('AAA', 'ZZZ') AND region != 'xx'",
    ],
)
def test_a_count_the_statistics_decide_is_answered_without_the_engine(sql_server, where):
    sql = f"SELECT count(*) AS n FROM {COW} WHERE {where}"
    runs = _engine_runs(sql_server)
    counted = _count(sql_server, sql)
    assert _engine_runs(sql_server) == runs  # no view was scanned
    assert counted == _count(sql_server, sql + ENGINE) > 0
    assert _engine_runs(sql_server) == runs + 1


@pytest.mark.parametrize(
    "table, where",
    [
        (COW, "txn_ts > 1700500000000"),  # a file spans both sides of the value
        (COW, "merchant_name IS NOT NULL"),  # a file holds a null
        (COW, "amount > 10"),  # decimal: not decided from statistics
        (COW, "region = 'us' AND merchant_name = 'Uber'"),
        (MOR_WITH_LOGS, "intField IS NOT NULL"),  # log files change the rows
    ],
)
def test_a_count_the_statistics_leave_open_is_counted_by_the_engine(sql_server, table, where):
    sql = f"SELECT count(*) AS n FROM {table} WHERE {where}"
    runs = _engine_runs(sql_server)
    counted = _count(sql_server, sql)
    assert _engine_runs(sql_server) == runs + 1
    assert counted == _count(sql_server, sql + ENGINE)
