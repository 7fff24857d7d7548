"""Tables written by other projects' suites (``FIXTURES_DIR / "external"``): table versions 3, 5,
6 and 8, metadata tables of version 6 and 8 tables.

Reference rows: the ``hudi`` package reads version 6+ tables; for versions 3 to 5, which it
refuses, it reads a copy whose ``hoodie.properties`` says ``hoodie.table.version=6`` (timeline
layout 1 is the same). It cannot decode log blocks older than content version 3, so the
snapshot rows of ``stock_ticks_mor`` (one Avro block of content version 1) are derived below.
"""

from __future__ import annotations

import re
import shutil
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from catalog import HudiTable, UnsupportedTableError
from catalog.errors import MetadataTableFallbackWarning
from catalog.listing.mdt_listing import MetadataTableListing
from catalog.listing.storage import StorageListing
from catalog.plan.options import ReadOptions
from catalog.plan.planner import file_slices
from tests.support.compare import assert_same_rows, hudi_read

COW_V5 = "trino/hudi_cow_pt_tbl"
MOR_V3 = "trino/stock_ticks_mor"
MOR_V6 = "trino/hudi_multi_fg_pt_v6_mor"
COW_V6 = "hudi-rs-history/trips_0x_cow_partitioned"
MOR_V8 = "trino/hudi_custom_keygen_pt_v8_mor"
MDT_TABLES = [MOR_V6, COW_V6, MOR_V8]


@pytest.fixture
def v6_copy(external_table, tmp_path):
    """``v6_copy(name)`` -> a copy of a v3-5 table that says ``hoodie.table.version=6``."""

    def _copy(name: str) -> str:
        target = tmp_path / "v6copy"
        shutil.copytree(external_table(name), target)
        props = target / ".hoodie/hoodie.properties"
        text = props.read_text()
        props.write_text(re.sub(r"(?m)^hoodie\.table\.version=.*$", "hoodie.table.version=6", text))
        return str(target)

    return _copy


def _open(path: str, **kwargs) -> HudiTable:
    """Open with a fallback from the metadata table being an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", MetadataTableFallbackWarning)
        return HudiTable.open(path, **kwargs)


def slice_keys(table: HudiTable, **options) -> list[tuple]:
    return sorted(
        (s.partition, s.file_id, s.base_instant, s.base_file.name if s.base_file else None,
         tuple(lf.name for lf in s.log_files))
        for s in file_slices(table.state, ReadOptions(**options))
    )


@pytest.mark.parametrize(
    "name, version, table_type",
    [(COW_V5, 5, "COPY_ON_WRITE"), (MOR_V3, 3, "MERGE_ON_READ"), (MOR_V6, 6, "MERGE_ON_READ"),
     (COW_V6, 6, "COPY_ON_WRITE"), (MOR_V8, 8, "MERGE_ON_READ")],
)
def test_versions_open(external_table, name, version, table_type):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MetadataTableFallbackWarning)  # cow_pt declares an MDT it lacks
        table = HudiTable.open(external_table(name))
    assert (table.table_version, table.table_type) == (version, table_type)


@pytest.mark.parametrize("version", ["2", "7", "10"])
def test_other_versions_are_refused_by_number(external_table, tmp_path, version):
    target = tmp_path / "t"
    shutil.copytree(external_table(COW_V5), target)
    props = target / ".hoodie/hoodie.properties"
    props.write_text(re.sub(r"(?m)^hoodie\.table\.version=.*$", f"hoodie.table.version={version}", props.read_text()))
    with pytest.raises(UnsupportedTableError, match=f"table version {version} is not supported"):
        HudiTable.open(str(target))


# -- version 5 COW: everything the reference supports ------------------------------------------
def test_v5_cow_matches_reference_on_v6_copy(external_table, v6_copy):
    path = external_table(COW_V5)
    ref = v6_copy(COW_V5)
    table = HudiTable.open(path)
    with pytest.warns(MetadataTableFallbackWarning, match="metadata table unreadable"):
        # hoodie.table.metadata.partitions=files, but the zip has no .hoodie/metadata
        assert table.read().num_rows == 2
    assert_same_rows(table.read(), hudi_read(ref), "v5 snapshot")
    assert_same_rows(table.read(query_type="read_optimized"), hudi_read(ref, read_optimized=True), "v5 ro")
    commits = [i.requested_time for i in table.timeline.commits]
    assert len(commits) == 2
    prev = None
    for t in commits:
        assert_same_rows(table.read(as_of=t), hudi_read(ref, as_of=t), f"v5 as_of {t}")
        inc = table.read(query_type="incremental", start=prev, end=t)
        assert inc.num_rows == 1
        assert_same_rows(inc, hudi_read(ref, start=prev, end=t), f"v5 incremental ({prev}, {t}]")
        prev = t


# -- version 3 MOR with a log block of content version 1 ---------------------------------------
STOCK_LOG_INSTANT = "20211227092838847"
STOCK_FILE_ID = "167a0e3e-9b94-444f-a178-242230cdb5a2-0"
META_CHANGED = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_file_name")


def _stock_snapshot_expected(base: pa.Table) -> pa.Table:
    """The v3 snapshot derived from the table's files: the log block (content version 1, decoded
    by hand in /work/notes/issue15_expected_rows.py) holds 99 upserts of exactly the 99 base keys
    with the same values (same ``ts``), so with OverwriteWithLatestAvroPayload every log record
    replaces its base row; only the meta columns the writer sets change: commit time = the log's
    instant, seqno ``<instant>_0_<n>`` keeping the base row's ``n``, and ``_hoodie_file_name`` = the
    file id (0.10 log records carry the file id, not a file name)."""
    seqno = pc.replace_substring_regex(base["_hoodie_commit_seqno"], r"^\d+_", f"{STOCK_LOG_INSTANT}_")
    columns = {
        "_hoodie_commit_time": pa.array([STOCK_LOG_INSTANT] * base.num_rows, pa.string()),
        "_hoodie_commit_seqno": seqno,
        "_hoodie_file_name": pa.array([STOCK_FILE_ID] * base.num_rows, pa.string()),
    }
    return pa.table(
        [columns.get(n, base[n]) for n in base.column_names],
        names=base.column_names,
    )


def test_v3_mor_read_optimized_matches_reference(external_table, v6_copy):
    table = _open(external_table(MOR_V3))
    assert table.config.merge_mode == "COMMIT_TIME_ORDERING"
    ro = table.read(query_type="read_optimized")
    assert ro.num_rows == 99
    assert_same_rows(ro, hudi_read(v6_copy(MOR_V3), read_optimized=True), "v3 ro")


def test_v3_mor_snapshot_applies_the_version_1_log_block(external_table, v6_copy):
    table = _open(external_table(MOR_V3))
    base = hudi_read(v6_copy(MOR_V3), read_optimized=True)
    assert base is not None
    base = base.cast(table.read(query_type="read_optimized").schema)
    snap = table.read()
    assert set(snap["_hoodie_commit_time"].to_pylist()) == {STOCK_LOG_INSTANT}
    assert_same_rows(snap, _stock_snapshot_expected(base), "v3 snapshot")
    first, second = (i.requested_time for i in table.timeline.commits)
    assert second == STOCK_LOG_INSTANT
    # time travel: before the log's instant the base rows; at it the merged rows
    assert_same_rows(table.read(as_of=first), base, "v3 as_of first")
    assert_same_rows(table.read(as_of=second), snap, "v3 as_of second")
    # incremental: the first commit wrote the base rows, the second the 99 log records
    assert_same_rows(table.read(query_type="incremental", end=first), base, "v3 incremental (, first]")
    assert_same_rows(table.read(query_type="incremental", start=first, end=second), snap, "v3 incremental")


# -- version 6 and 8 tables with a metadata table ----------------------------------------------
@pytest.mark.parametrize("name", MDT_TABLES)
def test_mdt_plans_without_fallback_like_storage_listing(external_table, name):
    path = external_table(name)
    mdt = _open(path)
    assert isinstance(mdt.state.listing, MetadataTableListing)
    plain = HudiTable.open(path, use_metadata_table=False)
    assert isinstance(plain.state.listing, StorageListing)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MetadataTableFallbackWarning)
        assert mdt.state.listing.list_partitions() == plain.state.listing.list_partitions()
        assert slice_keys(mdt) and slice_keys(mdt) == slice_keys(plain)
        for inst in plain.timeline.commits:
            for qt in ("snapshot", "read_optimized"):
                t = inst.requested_time
                assert slice_keys(mdt, as_of=t, query_type=qt) == slice_keys(plain, as_of=t, query_type=qt)
                assert_same_rows(mdt.read(as_of=t, query_type=qt), plain.read(as_of=t, query_type=qt), f"{t} {qt}")


def test_v6_mdt_compaction_instants_have_20_digits(external_table):
    """The v6 MDT's compactions are ``<instant>001.commit``: the compacted base HFiles belong to
    them, so without 20-digit instants the files partition would be empty (0 rows, no warning)."""
    table = _open(external_table(MOR_V6))
    mdt = table.state.metadata_table
    assert mdt is not None
    compactions = [i.requested_time for i in mdt.timeline.completed if i.action == "commit"]
    assert len(compactions) == 3 and all(len(t) == 20 and t.endswith("001") for t in compactions)
    (files_slice,) = mdt.file_slices("files")
    assert files_slice.base_instant in compactions
    assert table.read().num_rows == 4


@pytest.mark.parametrize("name, rows", [(MOR_V6, 4), (COW_V6, 5)])
def test_v6_mdt_tables_match_reference(external_table, name, rows):
    path = external_table(name)
    table = _open(path)
    assert isinstance(table.state.listing, MetadataTableListing)
    assert table.read().num_rows == rows
    assert_same_rows(table.read(), hudi_read(path), f"{name} snapshot")
    assert_same_rows(table.read(query_type="read_optimized"), hudi_read(path, read_optimized=True), f"{name} ro")
    prev = None
    for inst in table.timeline.commits:
        t = inst.requested_time
        assert_same_rows(table.read(as_of=t), hudi_read(path, as_of=t), f"{name} as_of {t}")
        inc = table.read(query_type="incremental", start=prev, end=t)
        assert_same_rows(inc, hudi_read(path, start=prev, end=t), f"{name} incremental ({prev}, {t}]")
        prev = t


def test_v6_mor_snapshot_reads_the_log_blocks(external_table):
    table = _open(external_table(MOR_V6))
    snap = table.read().sort_by("price")
    ro = table.read(query_type="read_optimized").sort_by("price")
    assert snap["price"].to_pylist() == [101.0, 102.0, 201.0, 202.0]
    assert ro["price"].to_pylist() == [100.0, 101.0, 200.0, 201.0]


def test_v8_custom_keygen_rows(external_table):
    """``hudi`` cannot read this table (it does not unescape ``field\\:TYPE`` partition fields):
    its rows are those of the latest base file of each of its 5 file groups (7 base files, no log
    files), ids 1 to 7."""
    path = external_table(MOR_V8)
    table = _open(path)
    assert isinstance(table.state.listing, MetadataTableListing)
    data = table.read()
    assert sorted(data["id"].to_pylist()) == list(range(1, 8))
    slices = list(file_slices(table.state, ReadOptions()))
    assert len(slices) == 5 and all(not s.log_files for s in slices)
    latest = {s.file_id: s.base_file.name for s in slices if s.base_file}
    assert set(data["_hoodie_file_name"].to_pylist()) == set(latest.values())


@pytest.mark.parametrize("name", [MOR_V6, COW_V6, MOR_V8])
def test_mdt_planning_request_count(external_table, name):
    mdt = _open(external_table(name))
    plain = HudiTable.open(external_table(name), use_metadata_table=False)
    mdt.storage.stats.reset()
    plain.storage.stats.reset()
    assert slice_keys(mdt) == slice_keys(plain)
    # two listings (the MDT's timeline and its files partition) whatever the data partitions;
    # reads: the files partition's HFile and log files. Measured: 6 / 8 / 13 requests in all
    # (v6 MOR, v6 COW, v8), against 5 / 7 / 15 listings without the MDT.
    assert mdt.storage.stats.counts["list"] == 2, mdt.storage.stats.snapshot()
    assert plain.storage.stats.counts["list"] >= 5
    assert mdt.storage.stats.total <= 14, mdt.storage.stats.snapshot()


def _copy_external(external_table, name: str, tmp_path: Path) -> Path:
    dest = tmp_path / "t"
    shutil.copytree(external_table(name), dest)
    return dest
