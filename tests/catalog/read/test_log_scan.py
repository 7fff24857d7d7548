"""Which log blocks of a slice count (format doc 4.6): instants, rollbacks, corrupt blocks."""

from __future__ import annotations

import pytest

from catalog import HudiTable
from catalog.errors import UnsupportedTableError
from catalog.format import log_file
from catalog.format.log_file import BlockType, LogBlock
from catalog.read.log_scan import scan_blocks, valid_blocks
from catalog.timeline import CommitSet

ROLLBACK = "sample_table/mor/parquet/v6_nonpartitioned_rollback"
FAILED = "20250126040826878"  # the instant rolled back by the command block in log.2
NEXT = "20250126060846931"  # the write in log.3


def _slice(table: HudiTable):
    (fs,) = table.state.fs_view.latest_file_slices([""], None)
    return fs


def test_rollback_command_removes_the_failed_block(fixture_table):
    table = HudiTable.open(fixture_table(ROLLBACK))
    fs = _slice(table)
    assert len(fs.log_files) == 3
    kept = valid_blocks(table.storage, fs, table.timeline.commit_set, table.timeline.commits[-1].requested_time)
    assert [(b.block_type, b.instant_time) for b in kept] == [(BlockType.PARQUET_DATA, NEXT)]


def test_a_slices_small_log_files_are_read_whole_together(fixture_table):
    """One ``read_ranges`` call for the slice's three log files (an object store answers it with
    concurrent requests: one round trip), no ``info`` or ``open``; the blocks carry their content."""
    table = HudiTable.open(fixture_table(ROLLBACK))
    fs = _slice(table)
    table.storage.stats.reset()
    kept = valid_blocks(table.storage, fs, table.timeline.commit_set, None)
    counts = table.storage.stats.snapshot()
    assert counts.get("info", 0) == 0 and counts.get("open", 0) == 0
    assert table.storage.stats.bytes_read == sum(log.size for log in fs.log_files)
    assert kept and all(b.content is not None for b in kept)


def test_log_files_past_the_whole_read_bound_are_walked_and_read_lazily(fixture_table, monkeypatch):
    table = HudiTable.open(fixture_table(ROLLBACK))
    fs = _slice(table)
    whole = valid_blocks(table.storage, fs, table.timeline.commit_set, None)
    monkeypatch.setattr(log_file, "WHOLE_READ_BYTES", 0)
    table.storage.stats.reset()
    walked = valid_blocks(table.storage, fs, table.timeline.commit_set, None)
    assert table.storage.stats.bytes_read == 0  # headers through open handles; contents not yet
    assert all(b.content is None for b in walked)  # contents are fetched later, only for these
    assert [b.load_content(table.storage) for b in walked] == [b.content for b in whole]


def test_time_travel_excludes_later_blocks(fixture_table):
    table = HudiTable.open(fixture_table(ROLLBACK))
    fs = _slice(table)
    assert valid_blocks(table.storage, fs, table.timeline.commit_set, "20250126040823628") == []


def _b(kind: BlockType, instant: str, **header: str) -> LogBlock:
    return LogBlock("log", 0, 0, kind, {"INSTANT_TIME": instant, **header})


def _commits(committed: set[str]) -> CommitSet:
    return CommitSet(frozenset(committed), frozenset(), None)


def test_rollback_removes_all_earlier_blocks_of_target_not_just_the_previous():
    blocks = [
        _b(BlockType.AVRO_DATA, "1"),
        _b(BlockType.AVRO_DATA, "2"),
        _b(BlockType.DELETE, "2"),
        _b(BlockType.AVRO_DATA, "3"),
        _b(BlockType.COMMAND, "4", COMMAND_BLOCK_TYPE="0", TARGET_INSTANT_TIME="2"),
        _b(BlockType.AVRO_DATA, "2"),  # a block after the rollback is not undone by it
    ]
    kept = scan_blocks(blocks, _commits({"1", "2", "3"}), None)
    assert [b.instant_time for b in kept] == ["1", "3", "2"]


def test_uncommitted_future_and_corrupt_blocks_are_skipped():
    blocks = [
        _b(BlockType.AVRO_DATA, "1"),
        LogBlock("log", 10, 5, BlockType.CORRUPT),
        _b(BlockType.AVRO_DATA, "2"),  # inflight / failed writer
        _b(BlockType.PARQUET_DATA, "3"),
        _b(BlockType.HFILE_DATA, "4"),  # hoodie.logfile.data.block.format=hfile
        _b(BlockType.DELETE, "5"),  # after the query instant
    ]
    kept = scan_blocks(blocks, _commits({"1", "3", "4", "5"}), "4")
    assert [b.instant_time for b in kept] == ["1", "3", "4"]


def test_unsupported_block_kinds_are_refused():
    with pytest.raises(UnsupportedTableError, match="CDC_DATA"):
        scan_blocks([_b(BlockType.CDC_DATA, "1")], _commits({"1"}), None)
    with pytest.raises(UnsupportedTableError, match="partial-update"):
        scan_blocks([_b(BlockType.AVRO_DATA, "1", IS_PARTIAL="true")], _commits({"1"}), None)


def _compacted(instant: str, listed: str) -> LogBlock:
    return _b(BlockType.AVRO_DATA, instant, COMPACTED_BLOCK_TIMES=listed)


@pytest.mark.parametrize("blocks, expected", [
    # Java's example: B1(i1), B2(i2), CB(i3, [i1, i2]) -> CB alone
    ([_b(BlockType.AVRO_DATA, "1"), _b(BlockType.DELETE, "2"), _compacted("3", "1,2")], ["3"]),
    # the compacted block takes the place of the newest instant it replaces (i1), before i2
    ([_b(BlockType.AVRO_DATA, "1"), _b(BlockType.AVRO_DATA, "2"), _compacted("3", "1"),
      _b(BlockType.AVRO_DATA, "4")], ["3", "2", "4"]),
    # nested: C5 compacts C3 (which compacted 1, 2) and 4 -> C5 alone
    ([_b(BlockType.AVRO_DATA, "1"), _b(BlockType.AVRO_DATA, "2"), _compacted("3", "1,2"),
      _b(BlockType.AVRO_DATA, "4"), _compacted("5", "3,4")], ["5"]),
    # a compacted block whose originals are all gone is not applied (as in Java)
    ([_compacted("3", "1,2"), _b(BlockType.AVRO_DATA, "4")], ["4"]),
])
def test_log_compaction_replaces_the_blocks_it_lists(blocks, expected):
    kept = scan_blocks(blocks, _commits({b.instant_time for b in blocks}), None)
    assert [b.instant_time for b in kept] == expected


def test_rolled_back_log_compaction_leaves_the_originals():
    blocks = [_b(BlockType.AVRO_DATA, "1"), _b(BlockType.AVRO_DATA, "2"), _compacted("3", "1,2"),
              _b(BlockType.COMMAND, "4", COMMAND_BLOCK_TYPE="0", TARGET_INSTANT_TIME="3")]
    assert [b.instant_time for b in scan_blocks(blocks, _commits({"1", "2", "3"}), None)] == ["1", "2"]
    # an uncommitted (failed) log compaction does not count either
    assert [b.instant_time for b in scan_blocks(blocks[:3], _commits({"1", "2"}), None)] == ["1", "2"]
