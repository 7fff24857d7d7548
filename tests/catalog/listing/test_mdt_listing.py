"""Planning through the metadata table gives the same slices and rows as storage listing, at
every completed instant of every fixture that has a metadata table; bad MDTs fall back."""

from __future__ import annotations

import shutil
import warnings
import zipfile
from pathlib import Path

import pyarrow as pa
import pytest

from catalog.errors import MetadataTableFallbackWarning
from catalog.hudi_table import HudiTable
from catalog.listing.mdt_listing import MetadataTableListing
from catalog.listing.storage import StorageListing
from catalog.plan.options import ReadOptions
from catalog.plan.planner import file_slices
from tests.support.fixtures import HUDI_DIR, all_table_names


def _has_mdt(name: str) -> bool:
    with zipfile.ZipFile(HUDI_DIR / f"{name}.zip") as zf:
        return any("/.hoodie/metadata/files/" in m for m in zf.namelist())


MDT_TABLES = [n for n in all_table_names() if _has_mdt(n)]


def slice_keys(table: HudiTable, **options) -> list[tuple]:
    return sorted(
        (s.partition, s.file_id, s.base_instant, s.base_file.name if s.base_file else None,
         tuple(lf.name for lf in s.log_files))
        for s in file_slices(table.state, ReadOptions(**options))
    )


def open_both(path: str) -> tuple[HudiTable, HudiTable]:
    with warnings.catch_warnings():
        warnings.simplefilter("error", MetadataTableFallbackWarning)
        mdt = HudiTable.open(path)
        assert isinstance(mdt.state.listing, MetadataTableListing)
    plain = HudiTable.open(path, use_metadata_table=False)
    assert isinstance(plain.state.listing, StorageListing)
    return mdt, plain


def test_fixture_discovery():
    assert "quickstart_trips_table/mor/avro/v8_trips_8i3u1d" in MDT_TABLES
    assert len(MDT_TABLES) >= 9


@pytest.mark.parametrize("name", MDT_TABLES)
def test_slices_equal_at_every_instant(fixture_table, name):
    mdt, plain = open_both(fixture_table(name))
    first = plain.timeline.commits[0].requested_time
    instants = [i.requested_time for i in plain.timeline.completed if i.requested_time >= first]
    assert len(instants) >= len(plain.timeline.commits) >= 1
    for instant in instants:
        for qt in ("snapshot", "read_optimized"):
            assert slice_keys(mdt, as_of=instant, query_type=qt) == slice_keys(plain, as_of=instant, query_type=qt)
    assert slice_keys(mdt) == slice_keys(plain)
    assert mdt.state.listing.list_partitions() == plain.state.listing.list_partitions()


def _sorted(table: pa.Table) -> pa.Table:
    keys = ("_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name", "_hoodie_commit_seqno")
    return table.sort_by([(k, "ascending") for k in keys])


@pytest.mark.parametrize("name", MDT_TABLES)
def test_reads_unchanged(fixture_table, name):
    mdt, plain = open_both(fixture_table(name))
    assert _sorted(mdt.read()).equals(_sorted(plain.read()))
    first = plain.timeline.commits[0].requested_time
    assert _sorted(mdt.read(as_of=first)).equals(_sorted(plain.read(as_of=first)))


def test_mdt_planning_request_count(fixture_table):
    path = fixture_table("sample_table/mor/avro/v9_txns_simple_meta")
    mdt, plain = open_both(path)
    mdt.storage.stats.reset()
    plain.storage.stats.reset()
    assert slice_keys(mdt) == slice_keys(plain)
    # MDT: no data-partition listing at all
    assert mdt.storage.stats.counts["list"] == 0
    assert plain.storage.stats.counts["list"] >= 4


# -- bad metadata tables: fall back with a warning, never a wrong file set --------------------
def _copy(fixture_table, name: str, tmp_path: Path) -> Path:
    dest = tmp_path / "t"
    shutil.copytree(fixture_table(name), dest)
    return dest


def _expect_fallback(path: Path, match: str) -> None:
    with pytest.warns(MetadataTableFallbackWarning, match=match):
        table = HudiTable.open(str(path))
        assert isinstance(table.state.listing, StorageListing)
    plain = HudiTable.open(str(path), use_metadata_table=False)
    assert slice_keys(table) == slice_keys(plain)
    assert _sorted(table.read()).equals(_sorted(plain.read()))


NAME = "sample_table/mor/avro/v9_txns_simple_meta"


def test_truncated_base_hfile_falls_back(fixture_table, tmp_path):
    path = _copy(fixture_table, NAME, tmp_path)
    base = next((path / ".hoodie/metadata/files").glob("files-0000-0_13-*.hfile"))
    base.write_bytes(base.read_bytes()[:-100])
    _expect_fallback(path, "HFile|trailer")


def test_undecodable_metadata_log_block_falls_back(fixture_table, tmp_path):
    path = _copy(fixture_table, NAME, tmp_path)
    log = next((path / ".hoodie/metadata/files").glob(".files-0000-0_20260307162620509.log.*"))
    data = bytearray(log.read_bytes())
    hfile_at = data.find(b"DATABLK*")
    assert hfile_at > 0
    data[hfile_at + 40 : hfile_at + 80] = b"\x00" * 40  # inside the gzip data of the block's HFile
    log.write_bytes(bytes(data))
    _expect_fallback(path, "does not decode|block")


def test_metadata_table_behind_falls_back(fixture_table, tmp_path):
    path = _copy(fixture_table, NAME, tmp_path)
    latest = HudiTable.open(str(path), use_metadata_table=False).timeline.latest_commit
    for f in (path / ".hoodie/metadata/.hoodie/timeline").glob(f"{latest.requested_time}_*.deltacommit"):
        f.unlink()  # the MDT never completed the data table's latest commit
    _expect_fallback(path, "behind")


def test_metadata_table_ahead_falls_back(fixture_table, tmp_path):
    path = _copy(fixture_table, NAME, tmp_path)
    latest = HudiTable.open(str(path), use_metadata_table=False).timeline.latest_commit
    for f in (path / ".hoodie/timeline").glob(f"{latest.requested_time}*"):
        f.unlink()  # the data table forgets its latest commit; the MDT still has it
    _expect_fallback(path, "ahead")


def test_missing_metadata_table_falls_back(fixture_table, tmp_path):
    path = _copy(fixture_table, NAME, tmp_path)
    shutil.rmtree(path / ".hoodie/metadata")
    _expect_fallback(path, "metadata table unreadable")


def test_disabled_or_unlisted_mdt_uses_storage_listing(fixture_table):
    path = fixture_table(NAME)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert isinstance(HudiTable.open(path, use_metadata_table=False).state.listing, StorageListing)
        v6 = HudiTable.open(fixture_table("sample_table/cow/v6_nonpartitioned"))
        assert isinstance(v6.state.listing, StorageListing)


def test_mdt_blocks_of_a_pending_data_commit_are_ignored(fixture_table, tmp_path):
    """6.5: the MDT commits before the data table; a data commit still inflight must not count."""
    path = _copy(fixture_table, NAME, tmp_path)
    latest = HudiTable.open(str(path), use_metadata_table=False).timeline.latest_commit
    for f in (path / ".hoodie/timeline").glob(f"{latest.requested_time}_*.deltacommit"):
        f.unlink()  # back to inflight: .requested and .inflight stay
    with warnings.catch_warnings():
        warnings.simplefilter("error", MetadataTableFallbackWarning)
        table = HudiTable.open(str(path))
        assert isinstance(table.state.listing, MetadataTableListing)
        assert latest.requested_time not in table.state.listing.mdt.valid_instants
        listing = table.state.listing
        listed = {n for files in listing.list_files(listing.list_partitions()).values() for n, _ in files}
    assert not any(latest.requested_time in n for n in listed)
    plain = HudiTable.open(str(path), use_metadata_table=False)
    assert slice_keys(table) == slice_keys(plain)
    assert _sorted(table.read()).equals(_sorted(plain.read()))


@pytest.mark.parametrize("cut", ["emptied", "removed"])
def test_latest_files_log_lost_falls_back(fixture_table, tmp_path, cut):
    """Issue 20: an emptied latest ``files`` log parsed without error and planned 10 of 12 rows."""
    path = _copy(fixture_table, NAME, tmp_path)
    latest = HudiTable.open(str(path), use_metadata_table=False).timeline.latest_commit
    log = next((path / ".hoodie/metadata/files").glob(f".files-0000-0_{latest.requested_time}.log.*"))
    if cut == "emptied":
        log.write_bytes(b"")
    else:
        log.unlink()
    _expect_fallback(path, "no log block of deltacommit")
