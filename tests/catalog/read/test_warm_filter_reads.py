"""Filter queries that are no record-key lookups, read through kept footers, decoded columns and
decoded log blocks: the same rows as a plain read, no storage request when warm, and a file that
changed never answered from what was kept of another version."""

from __future__ import annotations

import os
import uuid
from typing import Any, Iterator

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from catalog import HudiTable, UnsupportedTableError
from catalog.format.base_file import BaseFileRead
from catalog.format.caches import ReadCaches
from catalog.format.log_cache import DecodedLogBlocks
from catalog.format.parquet_cached import read_cached
from catalog.format.row_groups import DecodedRowGroups
from catalog.plan.options import ReadOptions
from catalog.plan.planner import plan
from catalog.plan.splits import FooterCache
from catalog.read.split_reader import read_splits
from catalog.state import TableState
from catalog.storage import Storage
from hudi_generator.generator import MERGE_ON_READ, GeneratorSpec
from tests.support.compare import assert_same_rows
from tests.support.fixtures import all_table_names, is_lance
from tests.support.written import written_tables

COW = GeneratorSpec(rows=3000, partitions=3, row_group_size=250, commits=2, record_index=True)
MOR = GeneratorSpec(rows=3000, partitions=3, row_group_size=250, commits=3, table_type=MERGE_ON_READ,
                    record_index=True)
#: data-column filters (none pins a record key): a column range, a partition and a column, a value
FILTERS = [
    [("fare", ">", 990.0)],
    [("region", "=", "region-00001"), ("fare", "<", 40.0)],
    [("rider", "in", ["rider-7-v1", "rider-7-v2", "rider-12-v3"])],
]


class Caches:
    """What a server keeps between queries: footers, decoded columns, decoded log blocks."""

    def __init__(self, max_bytes: int = 64 << 20) -> None:
        self.footers = FooterCache(8 << 20)
        self.read = ReadCaches(self.footers, DecodedRowGroups(max_bytes), DecodedLogBlocks(max_bytes))


def _query(state: TableState, filters: list, caches: Caches | None) -> pa.Table:
    footers = caches.footers if caches is not None else None
    scan = plan(state, ReadOptions(filters=filters), footers=footers)
    assert scan.context.point is None  # no record-key lookup: the filter path
    read = caches.read if caches is not None else ReadCaches()
    return pa.Table.from_batches(list(read_splits(scan.context, list(scan.splits), caches=read)), schema=scan.schema)


class _CountedOpens:
    """Every file the fsspec memory filesystem opens (byte reads included: fsspec reads through
    ``_open``), counted on the instance the tables use."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.fs = fsspec.filesystem("memory")
        self.opened: list[str] = []
        original = self.fs._open

        def counted(path: str, *args: Any, **kwargs: Any) -> Any:
            self.opened.append(path)
            return original(path, *args, **kwargs)

        monkeypatch.setattr(self.fs, "_open", counted)

    def copy(self, local: str) -> str:
        remote = f"memory://warm-{uuid.uuid4().hex}"
        self.fs.put(local, remote.removeprefix("memory://"), recursive=True)
        return remote


@pytest.mark.parametrize("spec", [COW, MOR], ids=["cow", "mor"])
def test_a_repeated_filter_query_opens_no_file_when_warm(generated_table, monkeypatch, spec):
    """Over fsspec (an object store's path): the second time, planning and reading open nothing."""
    counted = _CountedOpens(monkeypatch)
    state = TableState.load(Storage(counted.copy(generated_table(spec))))
    plain = HudiTable.open(generated_table(spec))
    caches = Caches()
    for filters in FILTERS:
        cold = _query(state, filters, caches)
        counted.opened.clear()
        state.storage.stats.reset()
        warm = _query(state, filters, caches)
        assert counted.opened == [], filters
        assert state.storage.stats.total == 0, state.storage.stats.snapshot()
        assert warm.sort_by("uuid").equals(cold.sort_by("uuid"))
        assert_same_rows(warm, plain.read(filters=filters), str(filters), exact_types=True)
    assert any(_query(state, filters, None).num_rows for filters in FILTERS)


@pytest.mark.parametrize("spec", [COW, MOR], ids=["cow", "mor"])
def test_local_filter_queries_read_nothing_when_warm_and_answer_as_a_plain_read(generated_table, spec):
    """Local disk (Arrow's own filesystem): a similar query (other values, the same columns) on a
    warm table reads nothing either, and the caches hold decoded columns, not rows of results."""
    state = HudiTable.open(generated_table(spec)).state
    caches = Caches()
    for filters in FILTERS:
        _query(state, filters, caches)
    similar = [[("fare", ">", 995.0)], [("region", "=", "region-00001"), ("fare", "<", 20.0)],
               [("rider", "=", "rider-7-v1")]]
    expected = [_query(state, filters, None) for filters in FILTERS + similar]
    state.storage.stats.reset()
    got = [_query(state, filters, caches) for filters in FILTERS + similar]
    assert state.storage.stats.total == 0, state.storage.stats.snapshot()
    for filters, ours, plain in zip(FILTERS + similar, got, expected):
        assert_same_rows(ours, plain, str(filters), exact_types=True)
    decoded = caches.read.row_groups.stats()
    assert decoded.hits > 0 and 0 < decoded.bytes <= decoded.max_bytes
    if spec is MOR:
        assert caches.read.log_blocks.stats().hits > 0


def test_a_full_scan_keeps_nothing_and_a_too_broad_filter_streams(generated_table):
    """Scans must not churn the caches: a read of every row keeps nothing, and a filter whose row
    groups would take more than a quarter of the cache is read as a plain scan (same rows)."""
    table = HudiTable.open(generated_table(COW))
    state = table.state
    small = Caches(max_bytes=64 << 10)
    assert _query(state, [], small).num_rows == table.read().num_rows
    assert small.read.row_groups.stats().entries == 0
    broad = [("fare", ">", 0.0)]
    assert_same_rows(_query(state, broad, small), _query(state, broad, None), "broad", exact_types=True)
    assert small.read.row_groups.stats().entries <= len(list(plan(state, ReadOptions()).splits))  # footers only


def _write(path: str, fares: list[float]) -> int:
    table = pa.table({"id": pa.array(range(len(fares)), pa.int64()), "fare": pa.array(fares, pa.float64())})
    pq.write_table(table, path, row_group_size=2)
    return os.path.getsize(path)


def _read_file(storage: Storage, size: int, caches: ReadCaches, native: bool) -> list[float]:
    schema = pa.schema([("id", pa.int64()), ("fare", pa.float64())])
    file = BaseFileRead("f.parquet", schema, size=size, filter=pc.field("fare") > 1.5, filter_columns=("fare",))
    batches: Iterator[pa.RecordBatch] = read_cached(storage, file, caches, native=native)
    return pa.Table.from_batches(list(batches), schema)["fare"].to_pylist()


@pytest.mark.parametrize("native", [True, False], ids=["arrow", "fsspec"])
def test_a_file_rewritten_with_another_size_is_read_again(tmp_path, native):
    """Kept columns are keyed by the file's full path and listed size: a file written again under
    the same name (another size) is decoded anew, never answered from the old version's columns."""
    storage = Storage(str(tmp_path))
    caches = ReadCaches(row_groups=DecodedRowGroups(1 << 20))
    first = _write(str(tmp_path / "f.parquet"), [1.0, 2.0, 3.0, 4.0])
    assert _read_file(storage, first, caches, native) == [2.0, 3.0, 4.0]
    assert _read_file(storage, first, caches, native) == [2.0, 3.0, 4.0]
    second = _write(str(tmp_path / "f.parquet"), [5.0, 1.0, 7.0, 8.0, 9.0, 0.5])
    assert second != first
    assert _read_file(storage, second, caches, native) == [5.0, 7.0, 8.0, 9.0]


def test_an_older_version_of_a_file_group_is_not_answered_from_the_newer_one(generated_table):
    """Time travel reads older file slices (other file names, fewer log files): each version
    answers as a plain read does, whatever the caches hold of the other."""
    table = HudiTable.open(generated_table(MOR))
    caches = Caches()
    filters = FILTERS[1]
    instants = [c.requested_time for c in table.timeline.commits]
    for as_of in instants + instants[::-1]:
        scan = plan(table.state, ReadOptions(filters=filters, as_of=as_of), footers=caches.footers)
        got = pa.Table.from_batches(list(read_splits(scan.context, list(scan.splits), caches=caches.read)),
                                    schema=scan.schema)
        assert_same_rows(got, table.read(filters=filters, as_of=as_of), as_of, exact_types=True)


def _filters_of(table: HudiTable) -> list[list[tuple]]:
    """A range and an equality on the first plain data column with values, from the snapshot."""
    rows = table.read()
    for field in rows.schema:
        plain = pa.types.is_integer(field.type) or pa.types.is_floating(field.type) or pa.types.is_string(field.type)
        values = [v for v in rows.column(field.name).to_pylist() if v is not None]
        if field.name.startswith("_hoodie") or not plain or not values:
            continue
        values.sort()
        middle = values[len(values) // 2]
        return [[(field.name, ">=", middle)], [(field.name, "=", values[0])]]
    return []


@pytest.mark.parametrize("name", [n for n in all_table_names() if not is_lance(n)])
def test_filter_queries_on_spark_written_tables_match_plain_reads_cold_and_warm(fixture_table, name):
    """Every Spark-written fixture (COW and MOR, table versions 6 to 9, log blocks of every kind,
    schema evolution, dropped partition columns): cold and warm through the caches, as a plain read."""
    table = HudiTable.open(fixture_table(name))
    caches = Caches()
    for filters in _filters_of(table) * 2:  # cold, then warm
        scan = plan(table.state, ReadOptions(filters=filters), footers=caches.footers)
        got = pa.Table.from_batches(list(read_splits(scan.context, list(scan.splits), caches=caches.read)),
                                    schema=scan.schema)
        assert_same_rows(got, table.read(filters=filters), f"{name} {filters}", exact_types=True)


@pytest.mark.parametrize("written", [t for t in written_tables() if t.name.startswith("mor_")
                                     and t.release in ("0.15.0", "1.1.1")], ids=lambda t: t.key)
def test_filter_queries_on_hudi_written_merge_on_read_tables_match_plain_reads(written_table, written):
    """Tables Hudi's Spark writer wrote (event-time and commit-time merges, partial updates,
    Parquet and HFile log blocks, bucket indexes, non-blocking concurrency): the narrowed merge
    of a warm filter query answers as the full merge does, and refuses what it refuses."""
    table = HudiTable.open(written_table(written))
    caches = Caches()
    try:
        filters_tried = _filters_of(table)
    except UnsupportedTableError as refused:  # e.g. a custom payload: refused by name, whatever the read
        scan = plan(table.state, ReadOptions(filters=[]), footers=caches.footers)
        with pytest.raises(UnsupportedTableError, match=str(refused)):
            list(read_splits(scan.context, list(scan.splits), caches=caches.read))
        return
    for filters in filters_tried * 2:  # cold, then warm
        scan = plan(table.state, ReadOptions(filters=filters), footers=caches.footers)
        got = pa.Table.from_batches(list(read_splits(scan.context, list(scan.splits), caches=caches.read)),
                                    schema=scan.schema)
        assert_same_rows(got, table.read(filters=filters), f"{written.key} {filters}", exact_types=True)
