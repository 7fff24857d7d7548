"""Pruning with column_stats, partition_stats and the record index: fewer base files opened,
the same rows as planning without the metadata table."""

from __future__ import annotations

import shutil
import warnings

import pyarrow as pa
import pytest

import catalog.scan as scan_module
from catalog.exceptions import MetadataTableFallbackWarning
from catalog.filters import bind_filters
from catalog.mdt_listing import MetadataTableListing
from catalog.table import HudiTable
from tests.test_mdt_listing import MDT_TABLES

TABLES = ["sample_table/cow/v9_txns_simple_meta", "sample_table/mor/avro/v9_txns_simple_meta"]
KEYS = ("_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name", "_hoodie_commit_seqno")


@pytest.fixture
def opened(monkeypatch):
    """Paths of the base files read, by wrapping the scan's Parquet reader."""
    paths: list[str] = []
    real = scan_module.read_parquet

    def counting(storage, arrow_fs, path, *args, **kwargs):
        paths.append(path)
        return real(storage, arrow_fs, path, *args, **kwargs)

    monkeypatch.setattr(scan_module, "read_parquet", counting)
    return paths


def run(path: str, filters, opened: list[str], use_mdt: bool, record_index: bool = False, **options):
    """(sorted rows, number of distinct base files opened)."""
    opened.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error", MetadataTableFallbackWarning)
        table = HudiTable.open(path, use_metadata_table=use_mdt)
        if use_mdt:
            table.listing.use_record_index = record_index
        result = table.read(filters=filters, **options)
    assert isinstance(table.listing, MetadataTableListing) == use_mdt
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
    listing = table.listing
    assert isinstance(listing, MetadataTableListing)
    scan = table.scan()
    slices = list(scan.plan_slices())
    partitions = scan.plan_partitions()
    bind = lambda f: bind_filters(f, table.schema)  # noqa: E731
    latest = scan.instant
    # partition_stats: EUR only in region=eu
    assert listing.prune_partitions(partitions, bind([("currency", "=", "EUR")]), instant=latest) == ["region=eu"]
    # record index alone (opt-in): two keys, their two file groups
    key_filter = bind([("txn_id", "in", ["TXN-017", "TXN-001"])])
    # these tables take later plain INSERTs, so keys are not provably unique: off by default
    assert not listing.use_record_index
    assert listing._prune_by_record_index(slices, key_filter, latest) == slices
    listing.use_record_index = True
    rli = listing._prune_by_record_index(slices, key_filter, latest)
    listing.use_record_index = False
    assert len(rli) == 2 < len(slices) and {s.partition for s in rli} == {"region=us"}
    # column stats: account ACC-A sits in one file group
    cs = listing.prune_slices(slices, bind([("account_id", "=", "ACC-A")]), instant=latest)
    assert 0 < len(cs) < len(slices)
    # a filter on a column without an index never prunes
    assert listing.prune_slices(slices, bind([("fee_amount", "is not null", None)]), instant=latest) == slices


@pytest.mark.parametrize("name", TABLES)
def test_time_travel_ignores_latest_only_indexes(fixture_table, opened, name):
    """Record index and partition stats describe the latest state; an older query must not use them."""
    path = fixture_table(name)
    table = HudiTable.open(path)
    first = table.timeline.commits[0].requested_time
    scan = table.scan(as_of=first)
    slices = list(scan.plan_slices())
    filters = bind_filters([("txn_id", "in", ["TXN-001", "TXN-017"])], table.schema)
    table.listing.use_record_index = True
    # only the (time-travel safe, per file name) column stats may prune here
    assert table.listing.prune_slices(slices, filters, instant=first) == table.listing._prune_by_column_stats(
        slices, filters
    )
    parts = scan.plan_partitions()
    cur = bind_filters([("currency", "=", "EUR")], table.schema)
    assert table.listing.prune_partitions(parts, cur, instant=first) == parts
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
    if {"column_stats", "partition_stats"} & set(plain.config.usable_metadata_partitions):
        assert pruned_somewhere


def test_record_index_is_used_by_default_only_when_the_timeline_proves_keys_unique(fixture_table):
    """Upsert-only tables get record-index pruning by default; a later plain INSERT turns it off."""
    from catalog.mdt_listing import keys_are_unique

    upserts = HudiTable.open(fixture_table("quickstart_trips_table/mor/avro/v8_trips_8i3u1d"))
    assert keys_are_unique(upserts.timeline) and upserts.listing.use_record_index
    key = upserts.read(columns=["uuid"])["uuid"][0].as_py()
    everything = list(upserts.scan().plan_slices())
    located = list(upserts.scan(filters=[("uuid", "=", key)]).plan_slices())
    assert len(located) == 1 < len(everything)
    assert upserts.read(filters=[("uuid", "=", key)])["uuid"].to_pylist() == [key]
    duplicated = HudiTable.open(fixture_table("sample_table/cow/v9_timebasedkeygen_nonhivestyle"))
    # TXN-001 was INSERTed twice (two partitions): the index, holding one location, is not exact
    assert not keys_are_unique(duplicated.timeline) and not duplicated.listing.use_record_index
    rows = duplicated.read(filters=[("txn_id", "=", "TXN-001")])
    assert rows.num_rows == 2
