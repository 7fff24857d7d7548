"""Metadata tables of a table's layout: ``file_groups`` and ``partitions``, as of an instant.

Both come from the file-system view planning uses (the metadata table's ``files`` partition
where usable, else a storage listing), so they show exactly the slices a read of the same
instant reads. Row counts are the ``numWrites`` of the write stat that wrote the base file (its
commit metadata; no file is opened); unknown (null) when that commit was archived.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any, Iterator

import pyarrow as pa

from catalog.fs_view import FileSystemView
from catalog.table.files import FileSlice
from catalog.timeline import Timeline

FILE_GROUPS_SCHEMA = pa.schema(
    [
        pa.field("partition", pa.string(), nullable=False),
        pa.field("file_id", pa.string(), nullable=False),
        pa.field("base_instant", pa.string(), nullable=False),
        pa.field("base_file", pa.string()),
        pa.field("base_file_size", pa.int64()),
        pa.field("base_file_rows", pa.int64()),
        pa.field("log_files", pa.int64(), nullable=False),
        pa.field("log_bytes", pa.int64(), nullable=False),
        pa.field("slices", pa.int64(), nullable=False),
        pa.field("pending_compaction", pa.string()),
    ]
)

PARTITIONS_SCHEMA = pa.schema(
    [
        pa.field("partition", pa.string(), nullable=False),
        pa.field("file_groups", pa.int64(), nullable=False),
        pa.field("base_files", pa.int64(), nullable=False),
        pa.field("log_files", pa.int64(), nullable=False),
        pa.field("base_file_rows", pa.int64()),
        pa.field("bytes", pa.int64(), nullable=False),
        pa.field("last_commit", pa.string()),
    ]
)


class _WrittenRows:
    """Rows written to each file by a commit (``numWrites`` of its write stats), per commit."""

    def __init__(self, timeline: Timeline):
        self._timeline = timeline
        self._by_instant: dict[str, dict[tuple[str, str], int]] = {}

    def rows(self, partition: str, name: str, instant: str) -> int | None:
        written = self._by_instant.get(instant)
        if written is None:
            written = self._by_instant[instant] = self._load(instant)
        return written.get((partition, name))

    def _load(self, instant: str) -> dict[tuple[str, str], int]:
        found = self._timeline.get(instant)
        if found is None:
            return {}
        out: dict[tuple[str, str], int] = {}
        for partition, stats in (self._timeline.commit_metadata(found).get("partitionToWriteStats") or {}).items():
            for stat in stats or []:
                path, rows = stat.get("path"), stat.get("numWrites")
                if isinstance(path, str) and isinstance(rows, int) and not isinstance(rows, bool):
                    out[(partition or "", posixpath.basename(path))] = rows
        return out


@dataclass(frozen=True)
class GroupFacts:
    """The latest slice of one live file group and what is pending on it."""

    file_slice: FileSlice
    slices: int
    pending_compaction: str | None
    base_rows: int | None


def group_facts(view: FileSystemView, as_of: str | None) -> Iterator[GroupFacts]:
    """Every live file group's latest slice as of ``as_of`` (``None``: now), partition by partition."""
    written = _WrittenRows(view.timeline)
    partitions = sorted(view.listing.list_partitions())
    for group in view.file_groups(partitions, as_of):
        latest = view.latest_slice(group)
        if latest is None:
            continue
        base = latest.base_file
        rows = written.rows(latest.partition, base.name, base.instant) if base is not None else None
        yield GroupFacts(latest, len(group.slices), view.pending_compaction(group), rows)


def file_groups_table(view: FileSystemView, as_of: str | None = None) -> pa.Table:
    """One row per live file group: its latest slice's base file and the log files behind it."""
    rows: list[dict[str, Any]] = []
    for facts in group_facts(view, as_of):
        fs, base = facts.file_slice, facts.file_slice.base_file
        rows.append(
            {
                "partition": fs.partition,
                "file_id": fs.file_id,
                "base_instant": fs.base_instant,
                "base_file": base.name if base is not None else None,
                "base_file_size": base.size if base is not None else None,
                "base_file_rows": facts.base_rows,
                "log_files": len(fs.log_files),
                "log_bytes": sum(log.size for log in fs.log_files),
                "slices": facts.slices,
                "pending_compaction": facts.pending_compaction,
            }
        )
    return pa.Table.from_pylist(rows, schema=FILE_GROUPS_SCHEMA)


def _last_commits(timeline: Timeline, as_of: str | None) -> dict[str, str]:
    """Partition -> requested time of the latest completed write (at or before ``as_of``) that
    wrote into it, from the active timeline's commit metadata."""
    out: dict[str, str] = {}
    for instant in timeline.commits:
        if as_of is not None and instant.requested_time > as_of:
            continue
        for partition in (timeline.commit_metadata(instant).get("partitionToWriteStats") or {}):
            out[partition or ""] = instant.requested_time
    return out


def partitions_table(view: FileSystemView, as_of: str | None = None) -> pa.Table:
    """One row per partition with live file groups: files, base file rows (null when one is
    unknown) and bytes of the latest slices, and the last commit that wrote into it (null when
    that was archived)."""
    totals: dict[str, dict[str, Any]] = {}
    for facts in group_facts(view, as_of):
        fs = facts.file_slice
        empty = {"file_groups": 0, "base_files": 0, "log_files": 0, "base_file_rows": 0, "bytes": 0}
        row = totals.setdefault(fs.partition, {"partition": fs.partition, **empty})
        row["file_groups"] += 1
        row["base_files"] += fs.base_file is not None
        row["log_files"] += len(fs.log_files)
        row["bytes"] += fs.total_size
        if row["base_file_rows"] is not None and fs.base_file is not None:
            row["base_file_rows"] = None if facts.base_rows is None else row["base_file_rows"] + facts.base_rows
    last = _last_commits(view.timeline, as_of)
    rows = [{**totals[p], "last_commit": last.get(p)} for p in sorted(totals)]
    return pa.Table.from_pylist(rows, schema=PARTITIONS_SCHEMA)


__all__ = [
    "FILE_GROUPS_SCHEMA",
    "PARTITIONS_SCHEMA",
    "GroupFacts",
    "file_groups_table",
    "group_facts",
    "partitions_table",
]
