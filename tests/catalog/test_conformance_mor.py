"""Merge-on-read conformance with the ``hudi`` package on every MOR fixture table.

For each table: snapshot, read-optimized, time travel at every completed commit and incremental
reads between consecutive commits, compared value by value (rows sorted). Where the fixture's
``.sql`` pins the expected final rows, they are checked too: the package and the SQL agree on
all fixtures in ``shared/fixtures`` (rollback, deletes, updates), so no case needs a verdict.
"""

from __future__ import annotations

import pytest

from catalog import HudiTable, UnsupportedTableError
from tests.support.compare import assert_same_rows, hudi_read
from tests.support.fixtures import all_table_names, is_lance, is_mor

MOR = [n for n in all_table_names() if is_mor(n)]
READABLE = MOR


def test_inventory_covers_log_kinds():
    # Avro and Parquet log blocks, versions 6/8/9 and Lance tables are all represented.
    assert any("/mor/avro/" in n for n in READABLE) and any("/mor/parquet/" in n for n in READABLE)
    assert {n.rsplit("/", 1)[-1][:2] for n in READABLE} >= {"v6", "v8", "v9"}
    assert any(is_lance(n) for n in READABLE)


@pytest.mark.parametrize("name", READABLE)
def test_snapshot_and_read_optimized(fixture_table, name):
    path = fixture_table(name)
    table = HudiTable.open(path)
    assert_same_rows(table.read(), hudi_read(path), f"{name} snapshot")
    assert_same_rows(table.read(query_type="read_optimized"), hudi_read(path, read_optimized=True), f"{name} ro")


@pytest.mark.parametrize("name", READABLE)
def test_time_travel_every_commit(fixture_table, name):
    path = fixture_table(name)
    table = HudiTable.open(path)
    for inst in table.timeline.commits:
        t = inst.requested_time
        assert_same_rows(table.read(as_of=t), hudi_read(path, as_of=t), f"{name} as_of {t}")


@pytest.mark.parametrize("name", READABLE)
def test_incremental_consecutive_commits(fixture_table, name):
    path = fixture_table(name)
    table = HudiTable.open(path)
    if not table.config.populate_meta_fields:
        with pytest.raises(UnsupportedTableError):
            table.read(query_type="incremental", start="00000000000000000")
        return
    # v8+ incremental ranges compare completion times, v6 requested times (format doc 7.5).
    bounds = [i.completion_time if table.table_version >= 8 else i.requested_time for i in table.timeline.commits]
    prev = None
    for end in bounds:
        ours = table.read(query_type="incremental", start=prev, end=end)
        assert_same_rows(ours, hudi_read(path, start=prev, end=end), f"{name} incremental ({prev}, {end}]")
        prev = end


def test_merge_actually_applies_logs(fixture_table):
    """Snapshot differs from read-optimized where logs hold updates and deletes (guards the
    comparison above against both sides silently ignoring logs)."""
    path = fixture_table("quickstart_trips_table/mor/avro/v8_trips_8i3u1d")
    table = HudiTable.open(path)
    snap = {r["rider"]: r["fare"] for r in table.read(columns=["rider", "fare"]).to_pylist()}
    # From the .sql: rider-A and rider-G updated to fare 0; rider-F and rider-J deleted.
    assert snap == {
        "rider-A": 0.0, "rider-C": 27.7, "rider-D": 33.9, "rider-E": 93.5, "rider-G": 0.0, "rider-I": 41.06,
    }
    # The last UPDATE (rider-G) is only in a log written after the compaction.
    ro = {r["rider"]: r["fare"] for r in table.read(columns=["rider", "fare"], query_type="read_optimized").to_pylist()}
    assert ro["rider-G"] == 43.40 and ro != snap


def test_rollback_fixture_matches_sql(fixture_table):
    """The rolled-back INSERT (Alice -> inactive, new Diana) must not show; the later write does."""
    path = fixture_table("sample_table/mor/parquet/v6_nonpartitioned_rollback")
    rows = HudiTable.open(path).read(columns=["id", "name", "isActive"]).sort_by("id").to_pylist()
    assert rows == [
        {"id": 1, "name": "Alice", "isActive": True},
        {"id": 2, "name": "Bob", "isActive": True},
        {"id": 3, "name": "Carol", "isActive": True},
    ]


def test_projection_and_filter_on_merged_rows(fixture_table):
    path = fixture_table("sample_table/mor/avro/v9_txns_simple_meta")
    table = HudiTable.open(path)
    full = table.read()
    col = [c for c in full.column_names if not c.startswith("_hoodie")][0]
    ours = table.read(columns=["_hoodie_record_key", col])
    assert_same_rows(ours, hudi_read(path, columns=["_hoodie_record_key", col]), "projection")
    key = full.column("_hoodie_record_key")[0].as_py()
    filtered = table.read(filters=[("_hoodie_record_key", "=", key)])
    assert filtered.num_rows == 1 and filtered.column("_hoodie_record_key")[0].as_py() == key
