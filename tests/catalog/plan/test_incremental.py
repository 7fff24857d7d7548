"""An incremental range reads the files its commits wrote, nothing else (``catalog.plan.incremental``),
on tables Hudi's own writer wrote; Hudi's answers to the same ranges are compared in
``tests/catalog/test_hudi_written.py``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.compute as pc
import pytest

from catalog import HudiTable, InvalidInstantError
from tests.data.factory.archive import Query
from tests.support.compare import assert_same_rows, hudi_read
from tests.support.written import WrittenTable

#: tables whose second commit upserts ids 4..7 with lower ordering values than the stored ones
LATE_ARRIVING = [WrittenTable("0.15.0", "mor_payload_default"), WrittenTable("1.2.0", "mor_merge_event_time")]
LOG_COMPACTION = WrittenTable("1.2.0", "mor_log_compaction")


def _ranges(table: WrittenTable) -> list[Query]:
    return [q for q in table.manifest().queries if q.query_type == "incremental" and q.start is not None]


def _copy(written_table, table: WrittenTable, tmp_path: Path) -> Path:
    path = tmp_path / table.name
    shutil.copytree(written_table(table), path)
    return path


@pytest.mark.parametrize("table", LATE_ARRIVING, ids=lambda t: t.key)
def test_late_arriving_update_is_the_range_row(written_table, table):
    """The range's commit logged updates that lose the snapshot merge to the stored base rows: the
    range reads its log files without the older base file, so its rows are the logged records
    (their own commit time and values), which the snapshot does not show."""
    path = written_table(table)
    (query,) = _ranges(table)
    hudi_table = HudiTable.open(path)
    slices = [split.file_slice for split in hudi_table.scan(**query.read_kwargs()).splits]
    assert slices and all(fs.base_file is None and fs.log_files for fs in slices)
    ours = hudi_table.read(**query.read_kwargs())
    assert sorted(ours["id"].to_pylist()) == ["id004", "id005", "id006", "id007"]
    assert set(ours["_hoodie_commit_time"].to_pylist()) == {table.manifest().instants[-1]["requested"]}
    snapshot = hudi_table.read(filters=[("id", "in", ["id004", "id005", "id006", "id007"])])
    assert pc.all(pc.greater(snapshot["ts"], pc.max(ours["ts"]))).as_py()


@pytest.mark.parametrize("table", [*LATE_ARRIVING, LOG_COMPACTION], ids=lambda t: t.key)
def test_the_hudi_package_answers_the_ranges_alike(written_table, table):
    """The second oracle agrees with Hudi's Spark reader on these ranges (an empty answer is no
    batch at all for the ``hudi`` package)."""
    path = written_table(table)
    for query in _ranges(table):
        ours = HudiTable.open(path).read(**query.read_kwargs())
        theirs = hudi_read(path, start=query.start, end=query.end)
        if theirs is None:
            assert ours.num_rows == 0, query.name
        else:
            assert_same_rows(ours, theirs, f"{table.key} {query.name}")


def _drop_written_log(path: Path, requested: str) -> None:
    """Remove one log file the commit requested at ``requested`` wrote (as the cleaner would)."""
    (log,) = path.glob(f"p0/.*_{requested}.log.*")
    log.unlink()


def test_range_whose_files_were_cleaned_scans_the_table(written_table, tmp_path):
    """Table version 8+: a range one of whose files is gone is read, as Hudi 1.x reads it, from the
    latest slices of the whole table, the rows of the range's commits kept."""
    table = LOG_COMPACTION
    path = _copy(written_table, table, tmp_path)
    instants = table.manifest().instants
    update = instants[2]  # upsert ids 8..11 v3: ids 9 and 10 are updated again by the next commit
    _drop_written_log(path, update["requested"])
    opened = HudiTable.open(str(path), use_metadata_table=False)
    ours = opened.read(query_type="incremental", start=instants[1]["completed"], end=update["completed"])
    snapshot = opened.read()
    in_range = snapshot.filter(pc.equal(snapshot["_hoodie_commit_time"], update["requested"]))
    assert ours.num_rows == 2
    assert_same_rows(ours, in_range, "full table scan")


def test_v6_range_whose_files_were_cleaned_is_refused(written_table, tmp_path):
    """Table version 6: Hudi 0.x does not fall back to a full table scan and fails on the missing
    file; we refuse the range by name."""
    table = LATE_ARRIVING[0]
    path = _copy(written_table, table, tmp_path)
    (query,) = _ranges(table)
    _drop_written_log(path, table.manifest().instants[0]["requested"])  # v6 logs carry the base instant
    opened = HudiTable.open(str(path), use_metadata_table=False)
    with pytest.raises(InvalidInstantError, match="cleaner removed"):
        opened.read(**query.read_kwargs())
    assert opened.read().num_rows == 12  # the snapshot does not need the range's files
    assert opened.read(query_type="incremental", end=query.start).num_rows == 12  # nor does the first commit


def test_v6_range_reads_without_the_older_files_it_wrote(written_table, tmp_path):
    """Table version 6: a cleaned older version of a file group the range wrote again is not read
    (Hudi 0.x reads the latest slices of the range's files only): the answer stays the same."""
    table = WrittenTable("0.15.0", "cow_core")
    path = _copy(written_table, table, tmp_path)
    instants = table.manifest().instants
    before = HudiTable.open(str(path), use_metadata_table=False).read(query_type="incremental")
    first = sorted(path.glob(f"p0/*_{instants[0]['requested']}.parquet"))
    later = [p for p in path.glob("p0/*.parquet") if p not in first and p.name.split("_")[0] in
             {f.name.split("_")[0] for f in first}]
    assert first and later  # the first commit's file group was written again
    first[0].unlink()
    after = HudiTable.open(str(path), use_metadata_table=False).read(query_type="incremental")
    assert_same_rows(after, before, "without the cleaned file version")
