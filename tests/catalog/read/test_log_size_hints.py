"""A log file's size from the metadata table is a hint: a wrong one never breaks a read.

Hudi 0.14/0.15 list the log files of a rolled-back write with size 1 in the metadata table. A
listing is wrapped here to list every log file too short (1 byte) or too long; each read path
(scans, time travel, point reads through the log cache, CDC) answers what planning by listing
storage answers, asking storage for the true size once per such file.
"""

from __future__ import annotations

from typing import Callable

import pyarrow as pa
import pytest

from catalog import HudiTable
from catalog.listing.mdt_listing import MetadataTableListing
from tests.catalog.format.test_log_cache import MOR, Caches, _log_keys, _point
from tests.support.compare import assert_same_rows, cdc_rows
from tests.support.written import written_tables

CDC_TABLE = next(t for t in written_tables() if t.key == "1.1.1/mor_cdc_data_before_after")
#: a table whose latest slices hold log files, and one whose log files were compacted since
SCANNED = [t for t in written_tables() if t.key == "1.1.1/mor_rollback"] + [CDC_TABLE]
WRONG_SIZES: dict[str, Callable[[int], int]] = {
    "size 1": lambda size: 1,
    "shorter": lambda size: size - 7,
    "longer": lambda size: size + 5000,
    "past the whole-read bound": lambda size: size + (64 << 20),
}


@pytest.fixture(params=sorted(WRONG_SIZES))
def wrong_log_sizes(request, monkeypatch) -> None:
    """The metadata table lists every log file with a wrong size."""
    wrong = WRONG_SIZES[request.param]
    listed = MetadataTableListing.list_files

    def list_files(self: MetadataTableListing, partitions):  # type: ignore[no-untyped-def]
        return {p: [(n, wrong(s) if ".log." in n else s) for n, s in files]
                for p, files in listed(self, partitions).items()}

    monkeypatch.setattr(MetadataTableListing, "list_files", list_files)


def _log_file_count(table: HudiTable, as_of: str | None = None) -> int:
    view = table.state.fs_view
    return sum(len(fs.log_files) for fs in view.latest_file_slices(table.state.listing.list_partitions(), as_of))


def _by_mdt_and_storage(path: str) -> tuple[HudiTable, HudiTable]:
    by_mdt = HudiTable.open(path)
    assert isinstance(by_mdt.state.listing, MetadataTableListing)
    return by_mdt, HudiTable.open(path, use_metadata_table=False)


@pytest.mark.parametrize("written", SCANNED, ids=lambda t: t.key)
def test_scans_and_time_travel_read_what_storage_holds(written_table, written, wrong_log_sizes):
    by_mdt, by_storage = _by_mdt_and_storage(written_table(written))
    assert any(_log_file_count(by_mdt, c.requested_time) for c in by_mdt.timeline.commits)
    assert_same_rows(by_mdt.read(), by_storage.read(), "snapshot", exact_types=True)
    for instant in by_mdt.timeline.commits:
        at = instant.requested_time
        assert_same_rows(by_mdt.read(as_of=at), by_storage.read(as_of=at), at, exact_types=True)


def test_cdc_reads_what_storage_holds(written_table, wrong_log_sizes):
    by_mdt, by_storage = _by_mdt_and_storage(written_table(CDC_TABLE))
    assert cdc_rows(by_mdt.read(query_type="cdc")) == cdc_rows(by_storage.read(query_type="cdc"))


def test_point_reads_through_the_log_cache_read_what_storage_holds(generated_table, wrong_log_sizes):
    path = generated_table(MOR)
    keys = [[key] for kind in _log_keys(path).values() for key in kind]
    by_mdt, by_storage = _by_mdt_and_storage(path)
    caches = Caches()
    for _ in range(2):  # cold, then from the cache
        for key in keys:
            ours = _point(by_mdt.state, key, caches)
            assert ours.equals(_point(by_storage.state, key, None)), key
    assert caches.logs.stats().hits


def test_a_wrong_size_costs_one_info_per_log_file(written_table, monkeypatch):
    """Listed too long, the bytes read are the whole file: only its size is asked, no reread."""
    listed = MetadataTableListing.list_files

    def list_files(self: MetadataTableListing, partitions):  # type: ignore[no-untyped-def]
        return {p: [(n, s + 10 if ".log." in n else s) for n, s in files]
                for p, files in listed(self, partitions).items()}

    path = written_table(SCANNED[0])
    expected = HudiTable.open(path).read()
    monkeypatch.setattr(MetadataTableListing, "list_files", list_files)
    table = HudiTable.open(path)
    logs = _log_file_count(table)
    assert logs
    table.storage.stats.reset()
    read = table.read()
    assert_same_rows(read, expected, exact_types=True)
    assert table.storage.stats.counts["info"] == logs


def test_a_size_listed_right_asks_no_info(written_table):
    table = HudiTable.open(written_table(SCANNED[0]))
    assert _log_file_count(table)
    table.storage.stats.reset()
    assert isinstance(table.read(), pa.Table)
    assert table.storage.stats.counts["info"] == 0
