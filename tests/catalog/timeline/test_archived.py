"""Archived timelines (format doc 2.8): time travel and incremental reads that reach back before the
active timeline, on generated version-8 tables whose first commits live in the LSM history."""

from __future__ import annotations

import pytest

from catalog import HudiTable
from catalog.storage import Storage
from catalog.table.config import TableConfig
from catalog.timeline.archived import ArchivedTimeline
from hudi_generator.generator import COPY_ON_WRITE, MERGE_ON_READ, GeneratorSpec, expected_table
from tests.support.compare import assert_same_rows, hudi_read

COMMITS, ARCHIVED = 6, 3


def _spec(table_type: str, metadata_table: bool = True) -> GeneratorSpec:
    return GeneratorSpec(rows=400, partitions=2, files_per_partition=2, commits=COMMITS, archive_commits=ARCHIVED,
                         table_type=table_type, metadata_table=metadata_table, update_fraction=0.3,
                         delete_fraction=0.05, workers=1, row_group_size=100)


def _data_columns(spec: GeneratorSpec) -> list[str]:
    return expected_table(spec).column_names


@pytest.mark.parametrize("table_type", [COPY_ON_WRITE, MERGE_ON_READ])
def test_lsm_history_is_read(generated_table, table_type):
    spec = _spec(table_type)
    path = generated_table(spec)
    storage = Storage(path)
    archived = ArchivedTimeline.load(storage, TableConfig.load(storage))
    instants = [r for r, _ in spec.instants()]
    assert [i.requested_time for i in archived.instants] == instants[:ARCHIVED]
    assert [i.completion_time for i in archived.instants] == [c for _, c in spec.instants()][:ARCHIVED]
    for inst in archived.instants:
        assert archived.metadata[inst.requested_time]["partitionToWriteStats"]
    table = HudiTable.open(path)
    assert [i.requested_time for i in table.timeline.commits] == instants[ARCHIVED:]


@pytest.mark.parametrize("table_type", [COPY_ON_WRITE, MERGE_ON_READ])
def test_time_travel_at_every_commit(generated_table, table_type):
    spec = _spec(table_type)
    path = generated_table(spec)
    table = HudiTable.open(path)
    columns = _data_columns(spec)
    for k, (requested, _) in enumerate(spec.instants(), start=1):
        ours = table.read(columns=columns, as_of=requested)
        assert_same_rows(ours, expected_table(spec, as_of=k), f"as_of commit {k}")


@pytest.mark.parametrize("table_type", [COPY_ON_WRITE, MERGE_ON_READ])
def test_incremental_between_consecutive_commits(generated_table, table_type):
    spec = _spec(table_type)
    path = generated_table(spec)
    table = HudiTable.open(path)
    columns = _data_columns(spec)
    times = spec.instants()
    # (start, end] compares completion times in table version 8
    for k in range(1, COMMITS + 1):
        start = times[k - 2][1] if k > 1 else None
        ours = table.read(columns=columns, query_type="incremental", start=start, end=times[k - 1][1])
        expected = expected_table(spec, as_of=k, since=k - 1) if k > ARCHIVED else _latest_written_by(spec, k)
        assert_same_rows(ours, expected, f"incremental into commit {k}")
    ours = table.read(columns=columns, query_type="incremental")
    assert_same_rows(ours, expected_table(spec), "incremental from the beginning")


def _latest_written_by(spec: GeneratorSpec, k: int):
    """A range reaching archived commits, as Hudi 1.x answers it (a full table scan): the rows of
    the latest snapshot that commit ``k`` wrote last."""
    import pyarrow.compute as pc

    since = expected_table(spec, with_meta=True, since=k - 1)
    later = expected_table(spec, with_meta=True, since=k)["_hoodie_record_key"]
    rows = since.filter(pc.invert(pc.is_in(since["_hoodie_record_key"], value_set=later)))
    return rows.select(_data_columns(spec))


def test_history_folder_comes_from_the_table_config(generated_copy):
    """``hoodie.timeline.history.path`` names the LSM history folder under the timeline folder."""
    import re
    from pathlib import Path

    spec = _spec(COPY_ON_WRITE, metadata_table=False)
    path = Path(generated_copy(spec))
    (path / ".hoodie/timeline/history").rename(path / ".hoodie/timeline/lsm")
    props = path / ".hoodie/hoodie.properties"
    moved = re.sub(r"(?m)^hoodie\.timeline\.history\.path=.*$", "hoodie.timeline.history.path=lsm", props.read_text())
    props.write_text(moved)
    table = HudiTable.open(str(path))
    first = spec.instants()[0][0]
    assert_same_rows(table.read(columns=_data_columns(spec), as_of=first), expected_table(spec, as_of=1), "as_of 1")
    props.write_text(moved.replace("hoodie.timeline.history.path=lsm", "hoodie.timeline.history.path=history"))
    with pytest.raises(Exception, match=first):  # nothing archived where the config points: no such commit
        HudiTable.open(str(path)).read(as_of=first)


def test_snapshot_does_not_read_the_archive(generated_table):
    spec = _spec(MERGE_ON_READ)
    table = HudiTable.open(generated_table(spec))
    table.read()
    assert table.timeline._archived is None
    table.read(as_of=spec.instants()[ARCHIVED][0])  # the first active commit: still no archive
    assert table.timeline._archived is None
    table.read(as_of=spec.instants()[0][0])
    assert table.timeline._archived is not None


def test_as_of_before_the_first_archived_commit_fails(generated_table):
    from catalog.errors import InvalidInstantError

    table = HudiTable.open(generated_table(_spec(COPY_ON_WRITE)))
    with pytest.raises(InvalidInstantError, match="before the table's first commit"):
        table.read(as_of="20240101000000000")


@pytest.mark.parametrize("table_type", [COPY_ON_WRITE, MERGE_ON_READ])
def test_hudi_package_on_archived_tables(generated_table, table_type):
    """The ``hudi`` package agrees on time travel at every commit, archived ones included (it reads
    no archive either: files older than its active timeline count as committed). Its incremental
    reads do not reach into the LSM history: a range of archived commits returns no rows (hudi-rs
    does not read archived timelines), pinned here; ours returns the commits' rows."""
    spec = _spec(table_type, metadata_table=False)
    path = generated_table(spec)
    table = HudiTable.open(path)
    columns = _data_columns(spec)
    times = spec.instants()
    for k, (requested, _) in enumerate(times, start=1):
        ours = table.read(columns=columns, as_of=requested)
        assert_same_rows(ours, hudi_read(path, columns=columns, as_of=requested), f"hudi as_of commit {k}")
    for k in range(1, COMMITS + 1):
        start, end = (times[k - 2][1] if k > 1 else "19700101000000000"), times[k - 1][1]
        ours = table.read(columns=columns, query_type="incremental", start=start, end=end)
        theirs = hudi_read(path, columns=columns, start=start, end=end)
        if k > ARCHIVED:
            assert_same_rows(ours, theirs, f"hudi incremental into commit {k}")
        else:
            assert theirs is None and ours.num_rows > 0, f"incremental into archived commit {k}"
