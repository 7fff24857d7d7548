"""Metadata tables of a table's history: ``timeline``, ``archived_timeline`` and ``commits``.

Column names follow Trino's Hudi connector where it has the table (``$timeline``: ``timestamp``,
``action``, ``state``, the requested time being the ``timestamp``); the rest are this project's.
"""

from __future__ import annotations

import posixpath
from typing import Any, Iterable

import pyarrow as pa

from catalog.timeline import Timeline
from catalog.timeline.instants import Instant

TIMELINE_SCHEMA = pa.schema(
    [
        pa.field("timestamp", pa.string(), nullable=False),
        pa.field("action", pa.string(), nullable=False),
        pa.field("state", pa.string(), nullable=False),
        pa.field("completion_time", pa.string()),
        pa.field("archived", pa.bool_(), nullable=False),
    ]
)

COMMITS_SCHEMA = pa.schema(
    [
        pa.field("timestamp", pa.string(), nullable=False),
        pa.field("completion_time", pa.string()),
        pa.field("action", pa.string(), nullable=False),
        pa.field("operation", pa.string()),
        pa.field("partitions_written", pa.int64(), nullable=False),
        pa.field("files_added", pa.int64(), nullable=False),
        pa.field("files_updated", pa.int64(), nullable=False),
        pa.field("records_written", pa.int64(), nullable=False),
        pa.field("records_inserted", pa.int64(), nullable=False),
        pa.field("records_updated", pa.int64(), nullable=False),
        pa.field("records_deleted", pa.int64(), nullable=False),
        pa.field("bytes_written", pa.int64(), nullable=False),
        pa.field("write_errors", pa.int64(), nullable=False),
        pa.field("archived", pa.bool_(), nullable=False),
    ]
)


def _completion(timeline: Timeline, instant: Instant) -> str | None:
    """The completion time where the timeline records one (table version 8+); before, Hudi's
    instant files carry no completion time, so none is shown."""
    return instant.completion_time if timeline.completion_times and instant.is_completed else None


def _timeline_rows(timeline: Timeline, instants: Iterable[Instant], archived: bool) -> list[dict[str, Any]]:
    return [
        {
            "timestamp": i.requested_time,
            "action": i.action,
            "state": i.state,
            "completion_time": _completion(timeline, i),
            "archived": archived,
        }
        for i in instants
    ]


def timeline_table(timeline: Timeline) -> pa.Table:
    """The active timeline: every instant, completed and pending, oldest first."""
    instants = sorted(timeline.completed + timeline.pending, key=lambda i: (i.requested_time, i.action))
    return pa.Table.from_pylist(_timeline_rows(timeline, instants, False), schema=TIMELINE_SCHEMA)


def archived_timeline_table(timeline: Timeline) -> pa.Table:
    """The archived timeline (completed instants older than the active one), read from storage
    on this request only."""
    start = timeline.start
    archived = [i for i in timeline.archived().instants if start is None or i.requested_time < start]
    return pa.Table.from_pylist(_timeline_rows(timeline, archived, True), schema=TIMELINE_SCHEMA)


def _stat(stat: dict[str, Any], key: str) -> int:
    value = stat.get(key)
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _updates_file(stat: dict[str, Any]) -> bool:
    """Whether a write stat changed an existing file (a merge, or a log appended to) rather than
    creating one: ``prevCommit`` names the slice it came from (``"null"`` for a new file)."""
    previous = stat.get("prevCommit")
    return bool(previous) and previous != "null"


def commit_row(timeline: Timeline, instant: Instant, metadata: dict[str, Any], archived: bool) -> dict[str, Any]:
    """One completed write's figures, summed over its write stats (format doc 2.4)."""
    stats = [
        (partition or "", stat)
        for partition, items in (metadata.get("partitionToWriteStats") or {}).items()
        for stat in items or []
        if isinstance(stat, dict)
    ]
    named = [(p, s) for p, s in stats if s.get("path")]
    updated = {(p, posixpath.basename(s["path"])) for p, s in named if _updates_file(s)}
    files = {(p, posixpath.basename(s["path"])) for p, s in named}
    return {
        "timestamp": instant.requested_time,
        "completion_time": _completion(timeline, instant),
        "action": instant.action,
        "operation": metadata.get("operationType") or None,
        "partitions_written": len({p for p, _ in stats}),
        "files_added": len(files - updated),
        "files_updated": len(updated),
        "records_written": sum(_stat(s, "numWrites") for _, s in stats),
        "records_inserted": sum(_stat(s, "numInserts") for _, s in stats),
        "records_updated": sum(_stat(s, "numUpdateWrites") for _, s in stats),
        "records_deleted": sum(_stat(s, "numDeletes") for _, s in stats),
        "bytes_written": sum(_stat(s, "totalWriteBytes") for _, s in stats),
        "write_errors": sum(_stat(s, "totalWriteErrors") for _, s in stats),
        "archived": archived,
    }


def commits_table(timeline: Timeline, as_of: str | None = None) -> pa.Table:
    """Every completed write of the active timeline (``as_of``: those requested at or before
    it, archived ones included when it reaches back before the active timeline), oldest first."""
    commits = timeline.commits
    if as_of is not None:
        commits = [i for i in timeline.all_commits(as_of) if i.requested_time <= as_of]
    active = set(timeline.commit_set.completed)
    rows = [
        commit_row(timeline, i, timeline.commit_metadata(i), i.requested_time not in active) for i in commits
    ]
    return pa.Table.from_pylist(rows, schema=COMMITS_SCHEMA)


__all__ = [
    "COMMITS_SCHEMA",
    "TIMELINE_SCHEMA",
    "archived_timeline_table",
    "commit_row",
    "commits_table",
    "timeline_table",
]
