"""Conformance with the ``hudi`` package on every fixture table.

Copy-on-write tables: snapshot, time travel at every completed commit, incremental between
consecutive commits, projections and filters. Merge-on-read tables: the same in read-optimized
mode (snapshot merging belongs to tests of the MOR merge). Lance base files (Hudi 1.2) included.
"""

from __future__ import annotations

import pytest

from catalog import HudiTable, UnsupportedTableError
from tests.support.compare import assert_same_rows, hudi_read
from tests.support.fixtures import all_table_names, is_lance, is_mor

TABLES = all_table_names()
READABLE = TABLES


def _query_type(name: str) -> str:
    return "read_optimized" if is_mor(name) else "snapshot"


def test_fixture_inventory_is_complete():
    # Nothing is skipped silently: every zip is read, the six Lance tables (COW and MOR) included.
    assert TABLES and READABLE == TABLES
    lance = [n for n in TABLES if is_lance(n)]
    assert len(lance) == 6 and any(is_mor(n) for n in lance) and not all(is_mor(n) for n in lance)


@pytest.mark.parametrize("name", READABLE)
def test_snapshot(fixture_table, name):
    path = fixture_table(name)
    table = HudiTable.open(path)
    ours = table.read(query_type=_query_type(name))
    meta = [
        "_hoodie_commit_time",
        "_hoodie_commit_seqno",
        "_hoodie_record_key",
        "_hoodie_partition_path",
        "_hoodie_file_name",
    ]
    # Meta columns come first, and only when the table populates them (format doc 2.5).
    assert ours.schema.names[:5] == meta if table.config.populate_meta_fields else not set(meta) & set(ours.schema.names)
    theirs = hudi_read(path, read_optimized=is_mor(name))
    assert_same_rows(ours, theirs, f"{name} snapshot")
    # Planning from storage listing gives the same rows on tables that have a metadata table.
    listed = HudiTable.open(path, use_metadata_table=False)
    assert_same_rows(listed.read(query_type=_query_type(name)), theirs, f"{name} snapshot, storage listing")


@pytest.mark.parametrize("name", READABLE)
def test_time_travel_every_commit(fixture_table, name):
    path = fixture_table(name)
    table = HudiTable.open(path)
    for inst in table.timeline.commits:
        ours = table.read(query_type=_query_type(name), as_of=inst.requested_time)
        theirs = hudi_read(path, read_optimized=is_mor(name), as_of=inst.requested_time)
        assert_same_rows(ours, theirs, f"{name} as_of {inst.requested_time}")


@pytest.mark.parametrize("name", [n for n in READABLE if not is_mor(n)])
def test_incremental_between_commits(fixture_table, name):
    path = fixture_table(name)
    table = HudiTable.open(path)
    if not table.config.populate_meta_fields:
        # Departure from hudi-rs, following Java Hudi (IncrementalRelation): without meta fields
        # there is no commit time to filter on, so the query is refused instead of returning
        # whole file groups.
        with pytest.raises(UnsupportedTableError, match="meta fields are disabled"):
            table.read(query_type="incremental", end=table.timeline.commits[-1].requested_time)
        return
    # v8+ ranges are in completion times, v6 in requested times (format doc 7.5).
    points = [i.completion_time if table.table_version >= 8 else i.requested_time for i in table.timeline.commits]
    for start, end in zip([None] + points, points):
        ours = table.read(query_type="incremental", start=start, end=end)
        theirs = hudi_read(path, start=start or "0", end=end)
        assert_same_rows(ours, theirs, f"{name} incremental ({start}, {end}]")


def _filterable_columns(table: HudiTable) -> list[str]:
    """Partition fields first (they prune partitions), then one string and one numeric column."""
    import pyarrow as pa

    ok = lambda t: pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_decimal(t) or pa.types.is_date(t)  # noqa: E731
    names = [f for f in table.partition_fields if ok(table.schema.field(f).type)]
    data = [f for f in table.schema if not f.name.startswith("_hoodie_") and f.name not in names]
    for pick in (pa.types.is_string, lambda t: pa.types.is_integer(t) or pa.types.is_decimal(t), pa.types.is_date):
        names += [f.name for f in data if pick(f.type)][:1]
    return names


@pytest.mark.parametrize("name", READABLE)
def test_projection_and_filters(fixture_table, name):
    path = fixture_table(name)
    table = HudiTable.open(path)
    query_type = _query_type(name)
    full = table.read(query_type=query_type)
    columns = _filterable_columns(table)
    if full.num_rows == 0:
        # No values to derive filters from: an empty table still answers with the projected schema.
        empty = table.read(columns=columns[:1], filters=[(columns[0], "is not null", None)], query_type=query_type)
        assert empty.num_rows == 0 and empty.schema.names == columns[:1]
        return
    assert columns, "every fixture has at least one filterable column"
    # Projection in a different order than the schema, with a meta column when present.
    projection = list(reversed(columns)) + (["_hoodie_record_key"] if table.config.populate_meta_fields else [])
    ours = table.read(columns=projection, query_type=query_type)
    assert ours.column_names == projection
    assert_same_rows(ours, hudi_read(path, columns=projection, read_optimized=is_mor(name)), f"{name} projection")
    for column in columns:
        values = sorted(v for v in set(full.column(column).to_pylist()) if v is not None)
        if not values:
            continue
        mid, low = values[len(values) // 2], values[0]
        for op, value in [("=", mid), ("!=", mid), ("<", mid), (">=", mid), ("in", [low, mid]), ("not in", [mid])]:
            flt = [(column, op, value)]
            ours = table.read(columns=projection, filters=flt, query_type=query_type)
            if column in table.partition_fields and table.config.is_timestamp_keygen:
                # hudi-rs fails here: it does not unescape "\:" in the persisted input date format
                # when turning the filter into a partition-path filter. Filter its full answer instead.
                full_theirs = hudi_read(path, read_optimized=is_mor(name))
                theirs = _arrow_filter(full_theirs, column, op, value).select(projection)
            else:
                theirs = hudi_read(path, columns=projection, filters=flt, read_optimized=is_mor(name))
            assert_same_rows(ours, theirs, f"{name} filter {flt}")


def _arrow_filter(table, column, op, value):
    """Reference row filter written directly with pyarrow.compute (null never matches)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    col = table.column(column)
    if op in ("in", "not in"):
        mask = pc.is_in(col, value_set=pa.array(value, col.type))
        mask = pc.and_(mask, pc.is_valid(col)) if op == "in" else pc.and_(pc.invert(mask), pc.is_valid(col))
    else:
        fn = {"=": pc.equal, "!=": pc.not_equal, "<": pc.less, ">=": pc.greater_equal}[op]
        mask = pc.fill_null(fn(col, pa.scalar(value, col.type)), False)
    return table.filter(mask)
