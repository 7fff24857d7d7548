"""Decoded row groups of point reads: the same rows as a plain read, decoded once per file version."""

from __future__ import annotations

import pyarrow as pa
import pytest

from catalog import HudiTable
from catalog.format.caches import ReadCaches
from catalog.format.row_groups import DecodedRowGroups, KeyColumn
from catalog.plan.options import ReadOptions
from catalog.plan.planner import plan
from catalog.read.split_reader import read_splits
from hudi_generator.generator import MERGE_ON_READ, GeneratorSpec

COW = GeneratorSpec(rows=2000, partitions=2, row_group_size=400, commits=2, record_index=True)
MOR = GeneratorSpec(rows=2000, partitions=2, row_group_size=400, commits=3, table_type=MERGE_ON_READ,
                    record_index=True)


def _read(path: str, filters: list, decoded: DecodedRowGroups | None) -> tuple[pa.Table, bool]:
    """The rows of ``filters`` read through ``decoded``, and whether the plan is a point read."""
    scan = plan(HudiTable.open(path).state, ReadOptions(filters=filters))
    batches = list(read_splits(scan.context, list(scan.splits), caches=ReadCaches(row_groups=decoded)))
    got = pa.Table.from_batches(batches, schema=scan.schema).sort_by("uuid")
    return got, scan.context.point is not None


def _live_keys(path: str, count: int) -> list[str]:
    keys = HudiTable.open(path).read(columns=["uuid"])["uuid"].to_pylist()
    return sorted(keys)[:: max(1, len(keys) // count)][:count]


@pytest.mark.parametrize("spec", [COW, MOR], ids=["cow", "mor"])
def test_point_reads_match_plain_reads_and_reuse_decoded_groups(generated_table, spec):
    path = generated_table(spec)
    cache = DecodedRowGroups(64 << 20)
    live = _live_keys(path, 6)
    for key in live + ["trip-missing"]:
        for wanted in ([key], [key, live[0]]):
            filters = [("uuid", "=", key)] if len(wanted) == 1 else [("uuid", "in", wanted)]
            got, point = _read(path, filters, cache)
            plain, _ = _read(path, filters, None)
            assert point
            assert got.equals(plain)
            assert set(got["uuid"].to_pylist()) == set(wanted) & set(live)
    stats = cache.stats()
    assert stats.misses > 0 and stats.hits > 0 and 0 < stats.bytes <= stats.max_bytes


@pytest.mark.parametrize("fare", [">", "<"])
def test_a_lookup_with_more_conditions_still_applies_them(generated_table, fare):
    path = generated_table(COW)
    key = _live_keys(path, 3)[1]
    filters = [("uuid", "in", [key, "trip-missing"]), ("fare", fare, -1.0)]
    cache = DecodedRowGroups(64 << 20)
    got, point = _read(path, filters, cache)
    assert point and cache.stats().entries > 0
    assert got.equals(_read(path, filters, None)[0])
    assert got.num_rows == (1 if fare == ">" else 0)


def test_only_key_filters_make_an_exact_lookup(generated_table):
    path = generated_table(COW)
    state = HudiTable.open(path).state
    exact = plan(state, ReadOptions(filters=[("uuid", "in", ["b", "a"]), ("uuid", "=", "a")]))
    assert exact.context.point is not None and exact.context.point.exact and exact.context.point.keys == ("a",)
    first = HudiTable.open(path).timeline.commits[0].requested_time
    for options in (ReadOptions(filters=[("uuid", "=", "a"), ("fare", ">", 1.0)]),
                    ReadOptions(filters=[("uuid", "=", "a")], query_type="incremental", start=first)):
        point = plan(state, options).context.point
        assert point is not None and not point.exact


def test_scans_keep_nothing_and_other_filters_are_no_point_reads(generated_table):
    """A read of every row keeps nothing; other filters are no point reads (they keep the decoded
    columns they test: ``tests/catalog/read/test_warm_filter_reads.py``) and answer the same."""
    path = generated_table(COW)
    cache = DecodedRowGroups(64 << 20)
    _, point = _read(path, [], cache)
    assert not point and cache.stats().entries == 0
    for filters in ([("fare", ">", 500.0)], [("uuid", ">", "trip-0000000100")]):
        got, point = _read(path, filters, cache)
        assert not point
        assert got.equals(_read(path, filters, None)[0])


def test_a_cache_of_zero_bytes_keeps_nothing_and_reads_the_same(generated_table):
    path = generated_table(COW)
    key = _live_keys(path, 1)[0]
    empty = DecodedRowGroups(0)
    got, _ = _read(path, [("uuid", "=", key)], empty)
    assert got.num_rows == 1 and got["uuid"][0].as_py() == key
    assert empty.stats().entries == 0


def test_a_rewritten_file_is_another_entry(generated_table):
    """A COW update rewrites the file group under a new file name: the old decoded groups never answer."""
    path = generated_table(COW)
    key = _live_keys(path, 1)[0]
    cache = DecodedRowGroups(64 << 20)
    latest, _ = _read(path, [("uuid", "=", key)], cache)
    first = HudiTable.open(path).timeline.commits[0].requested_time
    scan = plan(HudiTable.open(path).state, ReadOptions(filters=[("uuid", "=", key)], as_of=first))
    batches = read_splits(scan.context, list(scan.splits), caches=ReadCaches(row_groups=cache))
    old = pa.Table.from_batches(list(batches), schema=scan.schema)
    plain = HudiTable.open(path).read(filters=[("uuid", "=", key)], as_of=first)
    assert old.num_rows == latest.num_rows == 1
    assert old["_hoodie_commit_time"].equals(plain["_hoodie_commit_time"])


def test_a_remote_table_is_looked_up_through_fsspec_with_the_same_rows(generated_table):
    """Local files are decoded through Arrow's own filesystem, others through fsspec: one answer."""
    import uuid

    import fsspec

    from catalog.read.split_reader import read_splits as read
    from catalog.state import TableState
    from catalog.storage import Storage

    path = generated_table(COW)
    remote = f"memory://points-{uuid.uuid4().hex}"
    fsspec.filesystem("memory").put(path, remote.removeprefix("memory://"), recursive=True)
    key = _live_keys(path, 4)[2]
    answers = []
    for where in (path, remote):
        storage = Storage(where)
        scan = plan(TableState.load(storage), ReadOptions(filters=[("uuid", "=", key)]))
        assert scan.context.point is not None
        caches = ReadCaches(row_groups=DecodedRowGroups(64 << 20))
        table = pa.Table.from_batches(list(read(scan.context, list(scan.splits), caches=caches)), schema=scan.schema)
        answers.append(table.drop_columns([c for c in table.column_names if c.startswith("_hoodie")]))
        assert storage.stats.counts["open"] + storage.stats.counts["read"] >= 2  # footer and row group: counted either way
    assert answers[0].num_rows == 1 and answers[0].equals(answers[1])


def test_a_key_column_is_checked_once_and_every_match_is_found():
    from catalog.format.parquet_cached import _rows_of_keys

    cache = DecodedRowGroups(1 << 20)
    file = ("file:///t/f.parquet", 100)
    distinct = pa.chunked_array([["k1", "k2", None, "k3"]])
    repeated = pa.chunked_array([["k1", "k2"], ["k1", None]])
    ordered = pa.chunked_array([["a", "b", "b", "b", "c", "é"]])
    assert cache.key_column(file, 0, "uuid", distinct) == KeyColumn(unique=True, ascending=False)
    assert cache.key_column(file, 1, "uuid", repeated) == KeyColumn(unique=False, ascending=False)
    assert cache.key_column(file, 2, "uuid", ordered) == KeyColumn(unique=False, ascending=True)
    assert cache.key_column(file, 3, "uuid", pa.chunked_array([["b", "a"]])).ascending is False
    assert cache.key_column(file, 4, "uuid", pa.chunked_array([["a"], ["b"]])).ascending is False  # two chunks
    assert cache.key_column(file, 5, "uuid", pa.chunked_array([[b"a", b"b"]])).ascending is False  # not strings
    before = cache.stats()
    assert cache.key_column(file, 1, "uuid", repeated).unique is False  # kept: not counted again
    assert cache.stats().hits == before.hits + 1 and cache.stats().misses == before.misses
    scan_all, scan_first = KeyColumn(unique=False, ascending=False), KeyColumn(unique=True, ascending=False)
    assert _rows_of_keys(repeated, ("k1",), scan_all) == [0, 2]
    assert _rows_of_keys(distinct, ("k3",), scan_first) == [3]
    assert _rows_of_keys(distinct, ("k9",), scan_first) == []
    assert _rows_of_keys(repeated, ("k2", "k1"), scan_all) == [0, 1, 2]
    search = cache.key_column(file, 2, "uuid", ordered)
    assert _rows_of_keys(ordered, ("b",), search) == [1, 2, 3]
    assert [_rows_of_keys(ordered, (k,), search) for k in ("a", "c", "é", "0", "bb", "z")] == [[0], [4], [5], [], [], []]
    assert _rows_of_keys(pa.chunked_array([], pa.string()), ("a",), KeyColumn(unique=True, ascending=True)) == []




@pytest.mark.parametrize("rows", [3, 40], ids=["few rows", "many rows"])
def test_an_exact_lookup_narrows_rows_as_its_key_filter_does(rows):
    import pyarrow.acero as acero
    import pyarrow.compute as pc

    from catalog.format.row_groups import PointLookup

    values = [None if i % 7 == 3 else f"k{i % 5}" for i in range(rows)]
    for type_ in (pa.string(), pa.large_string()):
        batch = pa.record_batch({"uuid": pa.array(values, type_), "n": pa.array(range(rows))})
        for keys in (("k1",), ("k0", "k2"), ("k9",), ("k0", "k1", "k2", "k3", "k4")):
            got = PointLookup("uuid", keys, exact=True).rows_of(batch)
            plan = acero.Declaration.from_sequence([
                acero.Declaration("table_source", acero.TableSourceNodeOptions(pa.Table.from_batches([batch]))),
                acero.Declaration("filter", acero.FilterNodeOptions(pc.field("uuid").isin(list(keys)))),
            ])
            assert pa.Table.from_batches([got]) == plan.to_table(use_threads=False).combine_chunks(), keys
