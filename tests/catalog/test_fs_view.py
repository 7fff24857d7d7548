"""File system view: slices per file group as of an instant (format doc 3.3-3.7, 2.6)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hudi import HudiReadOptions, HudiTableBuilder

from catalog import HudiTable
from catalog.fs_view import FileSystemView
from catalog.listing.storage import StorageListing
from catalog.storage import Storage
from catalog.table.config import TableConfig
from catalog.timeline import Timeline
from tests.support.fixtures import all_table_names

READABLE = all_table_names()


def _ours(table: HudiTable, as_of: str | None, read_optimized: bool = False):
    view = table.state.fs_view
    slices = view.latest_file_slices(table.state.listing.list_partitions(), as_of, read_optimized)
    return sorted(
        (fs.partition, fs.file_id, fs.base_instant, fs.base_file.name if fs.base_file else None,
         tuple(lf.name for lf in fs.log_files))
        for fs in slices
    )


def _theirs(path: str, as_of: str | None, layout2: bool):
    """hudi-rs's slices. Its planner keeps v8+ log files written after ``as_of`` and drops their
    blocks only when reading; ours leaves them out of the slice (their instant is in the name), so
    those are removed here before comparing."""
    options = HudiReadOptions(hudi_options={"hoodie.read.as.of.timestamp": as_of} if as_of else None)
    slices = HudiTableBuilder.from_base_uri(path).build().get_file_slices(options)

    def visible(log_name: str) -> bool:
        return not (layout2 and as_of) or log_name.rsplit(".log.", 1)[0].rsplit("_", 1)[1] <= as_of

    return sorted(
        (s.partition_path, s.file_id, s.creation_instant_time, s.base_file_name or None,
         tuple(n for n in s.log_file_names if visible(n)))
        for s in slices
    )


@pytest.mark.parametrize("name", READABLE)
def test_slices_match_hudi_at_every_commit(fixture_table, name):
    path = fixture_table(name)
    table = HudiTable.open(path)
    for as_of in [None] + [i.requested_time for i in table.timeline.commits]:
        assert _ours(table, as_of) == _theirs(path, as_of, table.table_version >= 8), f"{name} as_of={as_of}"


# -- synthetic tables: cases no fixture has ------------------------------------------------

FG = "aaaaaaaa-0000-0000-0000-000000000000-0"


def _write_table(root: Path, version: int, table_type: str, instants: dict[str, bytes | dict], files: list[str]):
    hoodie = root / ".hoodie"
    timeline = hoodie / ("timeline" if version >= 8 else "")
    timeline.mkdir(parents=True, exist_ok=True)
    (hoodie / "hoodie.properties").write_text(
        f"hoodie.table.type={table_type}\nhoodie.table.version={version}\nhoodie.table.name=t\n"
        "hoodie.table.recordkey.fields=id\n"
    )
    for name, content in instants.items():
        data = json.dumps(content).encode() if isinstance(content, dict) else content
        (timeline / name).write_bytes(data)
    for name in files:
        (root / name).write_bytes(b"x")
    storage = Storage(str(root))
    config = TableConfig.load(storage)
    return FileSystemView(config, Timeline.load(storage, config), StorageListing(storage, config))


def _slices(view: FileSystemView, as_of=None, read_optimized=False):
    return [
        (fs.base_instant, fs.base_file.name if fs.base_file else None, [lf.name for lf in fs.log_files])
        for fs in view.latest_file_slices([""], as_of, read_optimized)
    ]


def test_v6_pending_compaction_merges_previous_slice(tmp_path):
    base = f"{FG}_0-1-1_20240101000000000.parquet"
    log1 = f".{FG}_20240101000000000.log.1_0-2-2"
    log_p = f".{FG}_20240103000000000.log.1_0-4-4"
    view = _write_table(
        tmp_path, 6, "MERGE_ON_READ",
        {
            "20240101000000000.deltacommit": b"", "20240102000000000.deltacommit": b"",
            "20240103000000000.compaction.requested": b"", "20240104000000000.deltacommit": b"",
        },
        [base, log1, log_p],
    )
    # Snapshot: previous base + previous logs + the logs written after the compaction was planned.
    assert _slices(view) == [("20240101000000000", base, [log1, log_p])]
    # Read-optimized falls back to the previous base file, without logs.
    assert _slices(view, read_optimized=True) == [("20240101000000000", base, [])]


def test_v6_uncommitted_and_too_new_files_are_ignored(tmp_path):
    old = f"{FG}_0-1-1_20240101000000000.parquet"
    new = f"{FG}_0-1-1_20240102000000000.parquet"
    failed = f"{FG}_0-1-1_20240103000000000.parquet"
    view = _write_table(
        tmp_path, 6, "COPY_ON_WRITE",
        {"20240101000000000.commit": b"", "20240102000000000.commit": b"", "20240103000000000.inflight": b""},
        [old, new, failed, ".DS_Store"],
    )
    assert _slices(view) == [("20240102000000000", new, [])]
    assert _slices(view, as_of="20240101000000000") == [("20240101000000000", old, [])]


def test_v6_replaced_file_groups_are_hidden_from_the_replace_instant_on(tmp_path):
    other = "bbbbbbbb-0000-0000-0000-000000000000-0"
    old = f"{FG}_0-1-1_20240101000000000.parquet"
    replacing = f"{other}_0-1-1_20240102000000000.parquet"
    view = _write_table(
        tmp_path, 6, "COPY_ON_WRITE",
        {
            "20240101000000000.commit": b"",
            "20240102000000000.replacecommit": {
                "partitionToWriteStats": {"": [{"fileId": other, "path": replacing}]},
                "partitionToReplaceFileIds": {"": [FG]},
                "operationType": "INSERT_OVERWRITE_TABLE",
            },
        },
        [old, replacing],
    )
    assert _slices(view) == [("20240102000000000", replacing, [])]
    assert _slices(view, as_of="20240101000000000") == [("20240101000000000", old, [])]


def test_v8_log_joins_slice_by_completion_time(tmp_path):
    base1 = f"{FG}_0-1-1_20240101000000000.parquet"
    base2 = f"{FG}_0-1-1_20240103000000000.parquet"  # compaction
    early = f".{FG}_20240102000000000.log.1_0-2-2"   # requested before, completed after the compaction
    before = f".{FG}_20240101500000000.log.1_0-2-2"   # completed before the compaction
    view = _write_table(
        tmp_path, 8, "MERGE_ON_READ",
        {
            "20240101000000000_20240101000000001.deltacommit": b"",
            "20240101500000000_20240101500000001.deltacommit": b"",
            "20240102000000000_20240104000000000.deltacommit": b"",
            "20240103000000000_20240103500000000.commit": b"",
        },
        [base1, base2, early, before],
    )
    assert _slices(view) == [("20240103000000000", base2, [early])]
    group = next(view.file_groups([""]))
    assert [(s.base_instant, [lf.name for lf in s.log_files]) for s in group.slices] == [
        ("20240101000000000", [before]),
        ("20240103000000000", [early]),
    ]


def test_v8_uncommitted_log_is_ignored(tmp_path):
    base = f"{FG}_0-1-1_20240101000000000.parquet"
    pending = f".{FG}_20240102000000000.log.1_0-2-2"
    view = _write_table(
        tmp_path, 8, "MERGE_ON_READ",
        {"20240101000000000_20240101000000001.deltacommit": b"", "20240102000000000.deltacommit.inflight": b""},
        [base, pending],
    )
    assert _slices(view) == [("20240101000000000", base, [])]
