"""Rows the fixtures' Spark SQL scripts imply, checked without the ``hudi`` package as oracle.

The scripts ran in a UTC-6 session (CST wall clock, format doc 1.3 note): a ``TIMESTAMP
'2024-01-15 10:30:00'`` literal is the instant 16:30 UTC, which is what Spark's Parquet holds.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from catalog import HudiTable

UTC = dt.timezone.utc


def _by_key(table, key):
    return {row[key]: row for row in table.to_pylist()}


def test_v9_txns_simple_nometa_final_state(fixture_table):
    t = HudiTable.open(fixture_table("sample_table/cow/v9_txns_simple_nometa"))
    rows = _by_key(t.read(), "txn_id")
    # 8 inserts, TXN-002 and TXN-005 deleted, eu overwritten by 011/012, then 013-018 inserted.
    assert sorted(rows) == ["TXN-001", "TXN-003", "TXN-007", "TXN-008", "TXN-011", "TXN-012",
                            "TXN-013", "TXN-014", "TXN-015", "TXN-016", "TXN-017", "TXN-018"]
    assert rows["TXN-001"]["txn_type"] == "reversal" and rows["TXN-001"]["txn_ts"] == 1700100000001
    assert rows["TXN-007"]["fee_amount"] == Decimal("75.00")
    assert rows["TXN-003"]["merchant_name"] is None
    assert sorted(k for k, r in rows.items() if r["region"] == "eu") == ["TXN-011", "TXN-012", "TXN-018"]
    assert rows["TXN-001"]["txn_datetime"] == dt.datetime(2024, 1, 15, 16, 30, tzinfo=UTC)
    assert rows["TXN-011"]["txn_date"] == dt.date(2024, 1, 18)
    assert rows["TXN-012"]["amount"] == Decimal("350.00") and rows["TXN-012"]["is_international"] is True


def test_v9_txns_simple_nometa_history(fixture_table):
    t = HudiTable.open(fixture_table("sample_table/cow/v9_txns_simple_nometa"))
    commits = t.timeline.commits
    first = _by_key(t.read(as_of=commits[0].requested_time), "txn_id")
    assert sorted(first) == [f"TXN-00{i}" for i in range(1, 9)]
    assert first["TXN-001"]["txn_type"] == "debit"
    after_update = _by_key(t.read(as_of=commits[1].requested_time), "txn_id")
    assert after_update["TXN-001"]["txn_type"] == "reversal" and "TXN-002" in after_update
    after_delete = _by_key(t.read(as_of=commits[2].requested_time), "txn_id")
    assert "TXN-002" not in after_delete and len(after_delete) == 7
    # The update of commit 2 alone, incrementally: only TXN-001 changed then.
    inc = t.read(query_type="incremental", start=commits[0].completion_time, end=commits[1].completion_time)
    assert inc.column("txn_id").to_pylist() == ["TXN-001"]


def test_v6_insert_overwrite_table_leaves_one_row(fixture_table):
    t = HudiTable.open(fixture_table("sample_table/cow/v6_simplekeygen_nonhivestyle_overwritetable"))
    [row] = t.read().to_pylist()
    assert (row["id"], row["name"], row["isActive"], row["byteField"]) == (4, "Diana", False, 30)
    assert row["decimalField"] == Decimal("65432.12345")
    assert row["timestampField"] == dt.datetime(2023, 4, 4, 20, 4, tzinfo=UTC)
    assert row["mapField"] == [
        ("key7", {"map_field_value_struct_f1": 456.789, "map_field_value_struct_f2": True}),
        ("key8", {"map_field_value_struct_f1": 123.456, "map_field_value_struct_f2": False}),
    ]
    assert row["structField"] == {"field1": "Diana", "field2": 50,
                                  "child_struct": {"child_field1": 987.654, "child_field2": True}}
    assert row["arrayField"] == [{"arr_struct_f1": "orange", "arr_struct_f2": 900},
                                 {"arr_struct_f1": "gray", "arr_struct_f2": 1000}]
    # Before the overwrite, the two inserts left four live keys.
    before = t.read(as_of=t.timeline.commits[1].requested_time)
    assert sorted(before.column("id").to_pylist()) == [1, 2, 3, 4]
