"""Pruning with column_stats, partition_stats and the record index: fewer base files opened,
the same rows as planning without the metadata table."""

from __future__ import annotations

import shutil
import warnings

import pyarrow as pa
import pytest

import catalog.read.cow as cow_module
from catalog.errors import MetadataTableFallbackWarning
from catalog.hudi_table import HudiTable
from catalog.listing.mdt_listing import MetadataTableListing
from catalog.plan.filters import bind_filters
from catalog.plan.options import ReadOptions
from catalog.plan.planner import file_slices
from catalog.plan.prune import (
    ColumnStatsPruner,
    PartitionStatsPruner,
    RecordIndexPruner,
    index_pruners,
    keys_are_unique,
)
from tests.catalog.listing.test_mdt_listing import MDT_TABLES

TABLES = ["sample_table/cow/v9_txns_simple_meta", "sample_table/mor/avro/v9_txns_simple_meta"]
KEYS = ("_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name", "_hoodie_commit_seqno")


@pytest.fixture
def opened(monkeypatch):
    """Paths of the base files read, by wrapping the scan's Parquet reader."""
    paths: list[str] = []
    real = cow_module.read_parquet

    def counting(storage, file, *args, **kwargs):
        paths.append(file.path)
        return real(storage, file, *args, **kwargs)

    monkeypatch.setattr(cow_module, "read_parquet", counting)
    return paths


def run(path: str, filters, opened: list[str], use_mdt: bool, record_index: bool = False, **options):
    """(sorted rows, number of distinct base files opened)."""
    opened.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error", MetadataTableFallbackWarning)
        table = HudiTable.open(path, use_metadata_table=use_mdt, use_record_index=record_index)
        result = table.read(filters=filters, **options)
    assert isinstance(table.state.listing, MetadataTableListing) == use_mdt
    return result.sort_by([(k, "ascending") for k in KEYS]), len(set(opened))


def expected(path: str, filters, **options) -> pa.Table:
    table = HudiTable.open(path, use_metadata_table=False)
    full = table.read(**options)
    mask = None
    for f in bind_filters(filters, table.schema):
        mask = f.expression() if mask is None else mask & f.expression()
    return full.filter(mask).sort_by([(k, "ascending") for k in KEYS])


CASES = [
    # (filters, index expected to prune)
    ([("txn_id", "in", ["TXN-001", "TXN-017"])], "record_index"),
    ([("txn_id", "=", "TXN-005")], "record_index"),  # a deleted key: nothing to open
    ([("account_id", "=", "ACC-A")], "column_stats"),
    ([("amount", ">", 1000)], "column_stats"),  # decimal statistics (index version 2)
    ([("txn_date", "=", "2024-01-21")], "column_stats"),  # date statistics
    ([("txn_datetime", "<", "2024-01-16")], "column_stats"),  # timestamp statistics
    ([("currency", "=", "EUR")], "partition_stats"),
    ([("txn_type", "=", "reversal")], None),  # MOR: only a log file has it
    ([("txn_ts", ">", 1700100000000)], None),
    ([("is_international", "=", True)], None),
]


@pytest.mark.parametrize("name", TABLES)
@pytest.mark.parametrize("filters,index", CASES, ids=[str(c[0]) for c in CASES])
def test_pruned_read_gives_same_rows(fixture_table, opened, name, filters, index):
    path = fixture_table(name)
    with_mdt, n_mdt = run(path, filters, opened, True, record_index=index == "record_index")
    plain, n_plain = run(path, filters, opened, False)
    assert with_mdt.equals(plain)
    assert with_mdt.equals(expected(path, filters))
    assert n_mdt <= n_plain
    if index is not None:
        assert n_mdt < n_plain, f"{index} did not prune"
    if index == "record_index":  # the column stats alone open more files than with the index
        _, n_stats_only = run(path, filters, opened, True)
        assert n_mdt <= n_stats_only


@pytest.mark.parametrize("name", TABLES)
def test_each_index_prunes_on_its_own(fixture_table, name):
    table = HudiTable.open(fixture_table(name))
    mdt = table.state.metadata_table
    assert mdt is not None
    slices = list(file_slices(table.state, ReadOptions()))
    partitions = table.state.listing.list_partitions()
    bind = lambda f: bind_filters(f, table.schema)  # noqa: E731
    # partition_stats: EUR only in region=eu
    assert PartitionStatsPruner(mdt).prune(partitions, bind([("currency", "=", "EUR")])) == ["region=eu"]
    # record index alone (opt-in): two keys, their two file groups
    key_filter = bind([("txn_id", "in", ["TXN-017", "TXN-001"])])
    # these tables take later plain INSERTs, so keys are not provably unique: off by default
    assert not RecordIndexPruner(mdt).enabled
    assert RecordIndexPruner(mdt).prune(slices, key_filter) == slices
    rli = RecordIndexPruner(mdt, use_record_index=True).prune(slices, key_filter)
    assert len(rli) == 2 < len(slices) and {s.partition for s in rli} == {"region=us"}
    # column stats: account ACC-A sits in one file group
    cs = ColumnStatsPruner(mdt).prune(slices, bind([("account_id", "=", "ACC-A")]))
    assert 0 < len(cs) < len(slices)
    # a filter on a column without an index never prunes
    assert ColumnStatsPruner(mdt).prune(slices, bind([("fee_amount", "is not null", None)])) == slices


@pytest.mark.parametrize("name", TABLES)
def test_time_travel_ignores_latest_only_indexes(fixture_table, opened, name):
    """Record index and partition stats describe the latest state; an older query must not use them."""
    path = fixture_table(name)
    table = HudiTable.open(path)
    first = table.timeline.commits[0].requested_time
    partition_pruners, slice_pruners = index_pruners(table.state.metadata_table, False, True)
    # only the (time-travel safe, per file name) column stats may prune here
    assert partition_pruners == [] and [type(p) for p in slice_pruners] == [ColumnStatsPruner]
    for filters in ([("txn_id", "in", ["TXN-001", "TXN-017"])], [("currency", "=", "EUR")]):
        with_mdt, _ = run(path, filters, opened, True, record_index=True, as_of=first)
        plain, _ = run(path, filters, opened, False, as_of=first)
        assert with_mdt.equals(plain)


def test_broken_column_stats_do_not_prune(fixture_table, tmp_path, opened):
    src = fixture_table(TABLES[1])
    path = tmp_path / "t"
    shutil.copytree(src, path)
    for f in (path / ".hoodie/metadata/column_stats").glob("*.hfile"):
        f.write_bytes(f.read_bytes()[:50])
    filters = [("account_id", "=", "ACC-A")]
    table = HudiTable.open(str(path))
    with pytest.warns(MetadataTableFallbackWarning, match="column_stats"):
        got = table.read(filters=filters).sort_by([(k, "ascending") for k in KEYS])
    assert got.equals(expected(str(path), filters))


@pytest.mark.parametrize("name", ["sample_table/cow/v9_timebasedkeygen_nonhivestyle",
                                  "sample_table/mor/avro/v9_timebasedkeygen_nonhivestyle"])
def test_record_index_is_opt_in_because_keys_may_repeat(fixture_table, opened, name):
    """These tables hold TXN-001 in two partitions (written with a non-global index); the record
    index keeps one location per key. By default we return what a full scan returns (as the
    hudi package and Java readers without ``hoodie.metadata.record.index.enable`` do); enabling
    the index reproduces Java's index-pruned answer, which misses the older copy."""
    path = fixture_table(name)
    filters = [("txn_id", "in", ["TXN-001", "TXN-004"])]
    default, _ = run(path, filters, opened, True)
    assert default.equals(expected(path, filters))
    assert default.num_rows == 3 and len(set(default["_hoodie_partition_path"].to_pylist())) >= 2
    pruned, _ = run(path, filters, opened, True, record_index=True)
    assert pruned.num_rows == 2


def _probe_filters(table: pa.Table) -> list[tuple]:
    """'=' and '>' on the middle value of every primitive column (stats of every type get used)."""
    out = []
    for field in table.schema:
        if pa.types.is_nested(field.type) or field.name.startswith("_hoodie") or table.num_rows == 0:
            continue
        values = table[field.name].drop_null().sort()
        if len(values) == 0:
            continue
        mid = values[len(values) // 2].as_py()
        out += [(field.name, "=", mid), (field.name, ">", mid)]
    return out


@pytest.mark.parametrize("name", MDT_TABLES)
def test_stats_pruning_never_changes_rows(fixture_table, opened, name):
    path = fixture_table(name)
    plain = HudiTable.open(path, use_metadata_table=False)
    full = plain.read()
    pruned_somewhere = False
    for flt in _probe_filters(full):
        with_mdt, n_mdt = run(path, [flt], opened, True)
        without, n_plain = run(path, [flt], opened, False)
        assert with_mdt.equals(without), flt
        pruned_somewhere |= n_mdt < n_plain
    # Hudi 1.2 keeps no column stats of Lance base files (only of log files), so those tables
    # have nothing to prune by, and their partition stats are not trusted.
    if plain.config.base_file_format == "PARQUET" and {"column_stats", "partition_stats"} & set(
        plain.config.usable_metadata_partitions
    ):
        assert pruned_somewhere


def test_record_index_is_used_by_default_only_when_the_timeline_proves_keys_unique(fixture_table):
    """Upsert-only tables get record-index pruning by default; a later plain INSERT turns it off."""

    upserts = HudiTable.open(fixture_table("quickstart_trips_table/mor/avro/v8_trips_8i3u1d"))
    assert keys_are_unique(upserts.timeline) and RecordIndexPruner(upserts.state.metadata_table).enabled
    key = upserts.read(columns=["uuid"])["uuid"][0].as_py()
    everything = list(file_slices(upserts.state, ReadOptions()))
    located = list(file_slices(upserts.state, ReadOptions(filters=[("uuid", "=", key)])))
    assert len(located) == 1 < len(everything)
    assert upserts.read(filters=[("uuid", "=", key)])["uuid"].to_pylist() == [key]
    duplicated = HudiTable.open(fixture_table("sample_table/cow/v9_timebasedkeygen_nonhivestyle"))
    # TXN-001 was INSERTed twice (two partitions): the index, holding one location, is not exact
    assert not keys_are_unique(duplicated.timeline)
    assert not RecordIndexPruner(duplicated.state.metadata_table).enabled
    rows = duplicated.read(filters=[("txn_id", "=", "TXN-001")])
    assert rows.num_rows == 2
