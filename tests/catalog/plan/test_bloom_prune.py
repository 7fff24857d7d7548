"""Pruning record-key lookups by the metadata table's bloom filters (``bloom_filters``), on tables
Hudi's Spark writer wrote with its ``BLOOM`` index and no record index: fewer splits planned, the
rows Hudi's own snapshot holds, through the library, Flight and Flight SQL; and the slices the
rule must keep (log files a base file's filter knows nothing of, missing or unreadable filters)."""

from __future__ import annotations

import json
import shutil
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import adbc_driver_flightsql.dbapi as adbc
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as flight
import pytest

from catalog import HudiTable
from catalog.errors import MetadataTableFallbackWarning
from catalog.listing.bloom_filters import base_file_filters
from catalog.plan.filters import bind_filters
from catalog.plan.options import ReadOptions
from catalog.plan.planner import file_slices
from catalog.plan.prune import BloomFilterPruner
from tests.data.factory.archive import read_result
from tests.support.compare import assert_same_rows
from tests.support.servers import serving_tables
from tests.support.written import WrittenTable, written_tables

LOOKUP_TABLES = [t for t in written_tables() if t.name in ("cow_bloom_index", "mor_bloom_index")]
#: every id the tables were written with (2, 3 updated; 4, 5 deleted) and two never written: one
#: past every file's key range, one inside them (only a bloom filter rules it out)
IDS = [f"id{i:03d}" for i in range(27)] + ["id999", "id0105"]
KEY_FILTERS = [[("id", "=", key)] for key in IDS] + [[("id", "in", ["id001", "id020", "id999"])]]


@pytest.fixture
def without_bloom(monkeypatch):
    """Turns bloom-filter pruning off (every other pruner stays) while the context is open."""

    class Off:
        def __enter__(self):
            monkeypatch.setattr(BloomFilterPruner, "prune", lambda self, slices, filters: list(slices))

        def __exit__(self, *exc):
            monkeypatch.undo()

    return Off()


def _snapshot(table: WrittenTable) -> pa.Table:
    return read_result(table.expected, next(q for q in table.manifest().queries if q.name == "snapshot"))


def _hudi_rows(snapshot: pa.Table, filters) -> pa.Table:
    (column, op, value), = filters
    mask = pc.equal(snapshot[column], value) if op == "=" else pc.is_in(snapshot[column], pa.array(value))
    return snapshot.filter(mask)


def _plan(path: str, filters, **options) -> tuple[pa.Table, int]:
    """(rows, splits planned) of a fresh table's read; the metadata table must be usable."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", MetadataTableFallbackWarning)
        table = HudiTable.open(path)
        splits = len(list(table.scan(filters=filters, **options).splits))
        return table.read(filters=filters, **options), splits


@pytest.mark.parametrize("table", LOOKUP_TABLES, ids=lambda t: t.key)
def test_point_lookups_plan_fewer_splits_and_return_hudis_rows(written_table, without_bloom, table):
    path = written_table(table)
    snapshot = _snapshot(table)
    pruned, plain = [], []
    for filters in KEY_FILTERS:
        rows, splits = _plan(path, filters)
        with without_bloom:
            rows_plain, splits_plain = _plan(path, filters)
        expected = _hudi_rows(snapshot, filters)
        assert_same_rows(rows, expected.select(rows.column_names), f"{table.key} {filters}")
        assert rows.sort_by("id").equals(rows_plain.sort_by("id"))
        assert splits <= splits_plain
        if not table.name.startswith("mor"):
            # copy-on-write: a filter rules out every base file but the key's own
            assert splits == len(set(expected["_hoodie_file_name"].to_pylist())), filters
        pruned.append(splits)
        plain.append(splits_plain)
    assert sum(pruned) < sum(plain), (pruned, plain)


@pytest.mark.parametrize("table", [t for t in LOOKUP_TABLES if t.name.startswith("mor")], ids=lambda t: t.key)
def test_merge_on_read_keeps_slices_with_log_files_unless_read_optimized(written_table, without_bloom, table):
    path = written_table(table)
    state = HudiTable.open(path).state
    slices = list(file_slices(state, ReadOptions()))
    with_logs = {fs.file_id for fs in slices if fs.log_files}
    assert 0 < len(with_logs) < len(slices)
    for filters in KEY_FILTERS:
        kept = {fs.file_id for fs in file_slices(state, ReadOptions(filters=filters))}
        with without_bloom:
            kept_plain = {fs.file_id for fs in file_slices(state, ReadOptions(filters=filters))}
        assert kept & with_logs == kept_plain & with_logs, filters  # the bloom filters drop none of them
        rows, splits = _plan(path, filters, query_type="read_optimized")
        with without_bloom:
            rows_plain, splits_plain = _plan(path, filters, query_type="read_optimized")
        assert rows.sort_by("id").equals(rows_plain.sort_by("id")) and splits <= splits_plain
        if filters == [("id", "=", "id0105")]:
            assert splits == 0 < splits_plain


def test_a_key_in_the_log_file_of_a_base_file_that_never_held_it_is_found(written_table):
    """``mor_bloom_bucket_logs``: a bucket index wrote ``id012`` into the log file of a file group
    whose base file (compacted before) never held it. Its filter rules the key out, so pruning by
    base files alone would lose the row; the slice is kept, and the row is Hudi's."""
    table = WrittenTable("1.2.0", "mor_bloom_bucket_logs")
    path = written_table(table)
    hudi = HudiTable.open(path)
    key = [("id", "=", "id012")]
    holder = [fs for fs in file_slices(hudi.state, ReadOptions()) if fs.partition == "p0"]
    assert len(holder) == 1 and holder[0].base_file is not None and holder[0].log_files
    mdt = hudi.state.metadata_table
    assert mdt is not None
    bloom = base_file_filters(mdt, [("p0", holder[0].base_file.name)])[("p0", holder[0].base_file.name)]
    assert not bloom.might_contain("id012") and bloom.might_contain("id000")
    rows, splits = _plan(path, key)
    assert_same_rows(rows, _hudi_rows(_snapshot(table), key).select(rows.column_names), "id012")
    assert rows.num_rows == 1 and splits == 1
    # read-optimized reads the base files only: the row is not there, and no split is planned
    rows, splits = _plan(path, key, query_type="read_optimized")
    assert rows.num_rows == 0 and splits == 0


def test_time_travel_prunes_by_each_files_own_filter(written_table, without_bloom):
    table = WrittenTable("1.2.0", "cow_bloom_index")
    path = written_table(table)
    first = HudiTable.open(path).timeline.commits[0].requested_time
    pruned = plain = 0
    for key in ("id000", "id010", "id011"):  # id011 came with the second commit
        rows, splits = _plan(path, [("id", "=", key)], as_of=first)
        with without_bloom:
            rows_plain, splits_plain = _plan(path, [("id", "=", key)], as_of=first)
        assert rows.equals(rows_plain) and splits == rows.num_rows == (key != "id011")
        pruned, plain = pruned + splits, plain + splits_plain
    assert pruned < plain


def test_missing_or_unreadable_filters_keep_every_file(written_table, without_bloom, tmp_path):
    table = WrittenTable("1.2.0", "cow_bloom_index")
    copy = tmp_path / "table"
    shutil.copytree(written_table(table), copy)
    key = [("id", "=", "id010")]
    with without_bloom:
        expected, splits_plain = _plan(str(copy), key)
    blooms = copy / ".hoodie" / "metadata" / "bloom_filters"
    logs = sorted(p for p in blooms.iterdir() if ".log." in p.name and not p.name.endswith(".crc"))
    # an unreadable partition: said, and nothing pruned
    saved = logs[-1].read_bytes()
    logs[-1].write_bytes(saved[:40] + b"\xff" * 64)
    with pytest.warns(MetadataTableFallbackWarning, match="bloom filter index not used"):
        table_ = HudiTable.open(str(copy))
        assert len(list(table_.scan(filters=key).splits)) == splits_plain
        assert table_.read(filters=key).equals(expected)
    # no filters at all (every entry missing): nothing pruned, nothing to say
    for log in logs:
        log.unlink()
    rows, splits = _plan(str(copy), key)
    assert splits == splits_plain > 1 and rows.equals(expected)


def test_only_record_key_equality_is_tested(written_table):
    table = HudiTable.open(written_table(WrittenTable("1.2.0", "cow_bloom_index")))
    mdt = table.state.metadata_table
    assert mdt is not None
    slices = list(file_slices(table.state, ReadOptions()))
    pruner = BloomFilterPruner(mdt)
    for filters in ([("id", ">", "id010")], [("name", "=", "name10_v1")], [("id", "!=", "id010")]):
        assert pruner.prune(slices, bind_filters(filters, table.schema)) == slices
    assert len(pruner.prune(slices, bind_filters([("id", "=", "id010")], table.schema))) == 1


def test_keys_the_record_index_located_read_no_filter(written_table, monkeypatch):
    """Where the record index answered, its groups are exact: no bloom filter is read."""
    import catalog.plan.prune as prune

    table = HudiTable.open(written_table(WrittenTable("1.2.0", "cow_bloom_index")))
    mdt = table.state.metadata_table
    assert mdt is not None
    slices = list(file_slices(table.state, ReadOptions()))
    key = bind_filters([("id", "=", "id010")], table.schema)

    class Located(prune.RecordIndexPruner):
        def _locate(self, filters):
            return {(s.partition, s.file_id) for s in slices}

    def unread(*args, **kwargs):
        raise AssertionError("a bloom filter was read")

    monkeypatch.setattr(prune, "base_file_filters", unread)
    assert BloomFilterPruner(mdt, record_index=Located(mdt, True)).prune(slices, key) == slices
    with pytest.raises(AssertionError, match="was read"):
        BloomFilterPruner(mdt).prune(slices, key)


def test_filters_read_for_lookups_are_not_kept_per_lookup(written_table, without_bloom):
    """A filter may be hundreds of kilobytes and each lookup asks for other files: the metadata
    table keeps no bloom records per lookup (it keeps the record index's small ones)."""
    path = written_table(WrittenTable("1.2.0", "mor_bloom_index"))

    def kept() -> int:
        table = HudiTable.open(path)
        for key in IDS:
            list(table.scan(filters=[("id", "=", key)]).splits)
        mdt = table.state.metadata_table
        assert mdt is not None
        return mdt.lookup_records

    with without_bloom:
        plain = kept()
    assert kept() == plain


def test_an_expression_index_prunes_lookups_of_its_column(written_table, without_bloom):
    """``cow_bloom_expression_index`` (Hudi 1.0.2): ``CREATE INDEX ... USING bloom_filters(name)``.
    A ``name`` lookup plans the files holding the name only, with Hudi's rows; at the first commit
    too (each file version has its own filter), and for names written only later or never."""
    table = WrittenTable("1.0.2", "cow_bloom_expression_index")
    path = written_table(table)
    snapshot = _snapshot(table)
    first = HudiTable.open(path).timeline.commits[0].requested_time
    names = sorted(set(snapshot["name"].to_pylist())) + ["name2_v1", "name10_v1x"]
    pruned = plain = 0
    for name in names:
        for options in ({}, {"as_of": first}):
            rows, splits = _plan(path, [("name", "=", name)], **options)
            with without_bloom:
                rows_plain, splits_plain = _plan(path, [("name", "=", name)], **options)
            assert rows.sort_by("id").equals(rows_plain.sort_by("id")) and splits <= splits_plain
            assert splits == len(set(rows["_hoodie_file_name"].to_pylist())), (name, options)
            if not options:
                assert_same_rows(rows, _hudi_rows(snapshot, [("name", "=", name)]).select(rows.column_names), name)
            pruned, plain = pruned + splits, plain + splits_plain
    assert pruned < plain / 2, (pruned, plain)
    # several filters: each index rules files out (the key's, the name's), never a file that matches
    both = [("id", "in", ["id010", "id011"]), ("name", "=", "name11_v1")]
    rows, splits = _plan(path, both)
    assert rows["id"].to_pylist() == ["id011"] and splits == 1


# -- served --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bloom_server(written_table, tmp_path_factory):
    tables = {t.identifier: written_table(t) for t in LOOKUP_TABLES}
    with serving_tables(tables, str(tmp_path_factory.mktemp("bloom-state"))) as server:
        yield server


def _served(server, table: WrittenTable, filters) -> tuple[pa.Table, int]:
    command = {"table": table.identifier, "filters": [list(f) for f in filters]}
    with flight.connect(f"grpc://127.0.0.1:{server.port}") as client:
        info = client.get_flight_info(flight.FlightDescriptor.for_command(json.dumps(command).encode()))
        with ThreadPoolExecutor(4) as pool:
            parts = list(pool.map(lambda ep: client.do_get(ep.ticket).read_all(), info.endpoints))
    return (pa.concat_tables(parts) if parts else info.schema.empty_table()), len(info.endpoints)


@pytest.mark.parametrize("table", LOOKUP_TABLES, ids=lambda t: t.key)
def test_served_point_lookups_are_pruned(bloom_server, written_table, table):
    """Flight plans the pruned splits (an endpoint each) and Flight SQL answers the same rows."""
    snapshot = _snapshot(table)
    path = written_table(table)
    for key in ("id000", "id013", "id024", "id999"):
        filters = [("id", "=", key)]
        expected = _hudi_rows(snapshot, filters)
        served, endpoints = _served(bloom_server, table, filters)
        assert_same_rows(served, expected.select(served.column_names), f"flight {table.key} {key}")
        assert endpoints == _plan(path, filters)[1]
        with adbc.connect(f"grpc://127.0.0.1:{bloom_server.port}", autocommit=True) as conn, conn.cursor() as cursor:
            cursor.execute(f"SELECT * FROM {table.identifier} WHERE id = '{key}'")
            sql = cursor.fetch_arrow_table()
        assert_same_rows(sql, expected.select(sql.column_names), f"flight sql {table.key} {key}")
    slices = len(list(file_slices(HudiTable.open(path).state, ReadOptions())))
    assert _served(bloom_server, table, [("id", "=", "id000")])[1] < slices


def test_the_bloom_tables_are_where_the_tests_expect(written_table):
    assert {t.key for t in LOOKUP_TABLES} >= {"0.15.0/cow_bloom_index", "0.15.0/mor_bloom_index",
                                              "1.2.0/cow_bloom_index", "1.2.0/mor_bloom_index"}
    assert (Path(written_table(WrittenTable("1.2.0", "mor_bloom_bucket_logs"))) / ".hoodie").is_dir()
