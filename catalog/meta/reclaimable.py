"""Files a table keeps on storage besides the slices a snapshot reads: what Hudi's cleaner and
its repair tool would take away.

- **Replaced file groups**: groups a completed replacecommit (clustering, insert overwrite)
  retired; their files stay until the cleaner removes them.
- **Older file slices**: earlier versions of live file groups, kept for time travel and
  incremental reads.
- **Orphaned files**: data files no commit accounts for (a failed write nobody rolled back, a
  retried task's extra file), found the way Hudi's ``HoodieRepairTool`` finds "dangling" files.

Which of the first two the cleaner may remove follows Hudi's ``KEEP_LATEST_COMMITS`` policy
(``CleanPlanner``): it keeps every file a query of the last ``hoodie.cleaner.commits.retained``
commits (default 10) may read, so the *earliest retained commit* ``E`` is the oldest of those
commits (never after a pending instant). A replaced group is cleanable once it was replaced
before ``E``; an older slice once a newer slice of its group was written before ``E`` (the
newest slice before ``E`` is what a read at ``E`` sees, so it stays). Savepointed instants'
slices are never cleanable.

Everything but orphans comes from the listing planning uses (the metadata table's ``files``
partition where usable); orphans need a listing of storage itself, one request per partition,
so they are looked for only in tables with at most ``max_partitions`` partitions.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Iterable

from catalog.fs_view import FileListing
from catalog.listing.storage import StorageListing
from catalog.state import TableState
from catalog.table.files import BaseFile, FileSlice, LogFile
from catalog.timeline import Timeline
from catalog.timeline.instants import Instant

COMMITS_RETAINED_KEY = "hoodie.cleaner.commits.retained"
DEFAULT_COMMITS_RETAINED = 10
#: orphans are looked for in tables with at most this many partitions (one listing request each)
MAX_LISTED_PARTITIONS = 1000
#: pending instants whose files the cleaner keeps (Hudi's earliest pending commit bounds what it cleans)
PENDING_WRITES = frozenset({"commit", "deltacommit", "replacecommit", "compaction", "logcompaction", "clustering"})


@dataclass(frozen=True)
class StoredFile:
    """A file on storage: its partition, name and size."""

    partition: str
    name: str
    size: int

    @property
    def path(self) -> str:
        """Relative to the table's base path."""
        return posixpath.join(self.partition, self.name) if self.partition else self.name


@dataclass(frozen=True)
class Retention:
    """How far back the cleaner keeps file versions.

    Attributes:
        commits: ``hoodie.cleaner.commits.retained``.
        source: where that number came from (the table's property, or Hudi's default).
        earliest: the earliest retained commit ``E`` (``None``: nothing is old enough to clean).
    """

    commits: int
    source: str
    earliest: str | None

    def cleanable(self, instant: str) -> bool:
        """Whether a file version superseded at ``instant`` is outside the retained window."""
        return self.earliest is not None and instant < self.earliest


@dataclass(frozen=True)
class ReplacedGroup:
    """A replaced file group still on storage: its files and the replacecommit that retired it."""

    partition: str
    file_id: str
    replaced_by: str
    files: tuple[StoredFile, ...]

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


@dataclass(frozen=True)
class OlderSlice:
    """A file slice of a live group older than the one a snapshot reads, and the base instant of
    the slice after it (the version that superseded it)."""

    file_slice: FileSlice
    superseded_at: str

    @property
    def files(self) -> int:
        return (self.file_slice.base_file is not None) + len(self.file_slice.log_files)


def retention(state: TableState) -> Retention:
    """The table's retention: ``hoodie.cleaner.commits.retained`` of its properties (writers
    seldom store it there) or Hudi's default, and the earliest commit it keeps."""
    text = state.config.properties.get(COMMITS_RETAINED_KEY, "").strip()
    commits, source = (int(text), f"{COMMITS_RETAINED_KEY} of the table") if text.isdigit() else (
        DEFAULT_COMMITS_RETAINED, f"{COMMITS_RETAINED_KEY} default")
    timeline = state.timeline
    written = timeline.commits
    earliest = written[len(written) - commits].requested_time if commits and len(written) > commits else None
    pending = [i.requested_time for i in timeline.pending if i.action in PENDING_WRITES]
    if earliest is not None and pending:
        earliest = min(earliest, min(pending))  # files a pending write or table service may need stay
    return Retention(commits, source, earliest)


def _savepointed(timeline: Timeline) -> frozenset[str]:
    return frozenset(i.requested_time for i in timeline.completed if i.action == "savepoint")


def _replacing_instants(timeline: Timeline) -> dict[tuple[str, str], str]:
    """(partition, file id) -> the completed replacecommit that retired the group (the latest)."""
    out: dict[tuple[str, str], str] = {}
    for instant in timeline.commits:
        if instant.action != "replacecommit":
            continue
        for partition, ids in (timeline.commit_metadata(instant).get("partitionToReplaceFileIds") or {}).items():
            for file_id in ids or []:
                out[(partition or "", file_id)] = instant.requested_time
    return out


def _file_id(name: str) -> str | None:
    parsed = BaseFile.parse(name) or LogFile.parse(name)
    return parsed.file_id if parsed is not None else None


def replaced_groups(state: TableState) -> list[ReplacedGroup]:
    """The replaced file groups whose files the table's listing still holds."""
    replacing = _replacing_instants(state.timeline)
    if not replacing:
        return []
    listing = state.listing
    partitions = sorted({p for p, _ in replacing} & set(listing.list_partitions()))
    files: dict[tuple[str, str], list[StoredFile]] = {}
    for partition, entries in listing.list_files(partitions).items():
        for name, size in entries:
            key = (partition, _file_id(name) or "")
            if key in replacing:
                files.setdefault(key, []).append(StoredFile(partition, name, size))
    return [
        ReplacedGroup(p, f, replacing[(p, f)], tuple(sorted(stored, key=lambda s: s.name)))
        for (p, f), stored in sorted(files.items())
    ]


def older_slices(state: TableState) -> list[OlderSlice]:
    """Every committed slice of a live file group but its latest, with the base instant of the
    slice after it (a pending compaction's slice without base file supersedes nothing yet)."""
    view = state.fs_view
    out = []
    for group in view.file_groups(sorted(view.listing.list_partitions())):
        written = [s for s in group.slices if s.base_file is not None or s.log_files]
        for older, newer in zip(written, written[1:]):
            if newer.base_file is not None or state.timeline.is_completed(newer.base_instant):
                out.append(OlderSlice(older, newer.base_instant))
    return out


def cleanable_slices(slices: Iterable[OlderSlice], kept: Retention, timeline: Timeline) -> list[OlderSlice]:
    """The older slices the cleaner removes under ``kept`` (see the module docstring)."""
    savepointed = _savepointed(timeline)
    return [s for s in slices if kept.cleanable(s.superseded_at) and s.file_slice.base_instant not in savepointed]


class _WrittenFiles:
    """The files each completed write names in its write stats, read on demand."""

    def __init__(self, timeline: Timeline):
        self._timeline = timeline
        self._by_instant: dict[str, frozenset[str] | None] = {}

    def of(self, instant: Instant) -> frozenset[str] | None:
        """Relative paths the write stats of ``instant`` name (``None``: none recorded)."""
        if instant.requested_time not in self._by_instant:
            stats = self._timeline.commit_metadata(instant).get("partitionToWriteStats") or {}
            paths = frozenset(
                str(s["path"]).lstrip("/") for items in stats.values() for s in items or []
                if isinstance(s, dict) and s.get("path")
            )
            self._by_instant[instant.requested_time] = paths or None
        return self._by_instant[instant.requested_time]


def _storage_listing(state: TableState) -> FileListing:
    """A listing of storage itself: the state's own when it lists storage, else a new one."""
    listing = state.listing
    return listing if isinstance(listing, StorageListing) else StorageListing(state.storage, state.config)


def orphaned_files(state: TableState, max_partitions: int = MAX_LISTED_PARTITIONS) -> list[StoredFile] | None:
    """Data files on storage no commit accounts for, by Hudi's repair tool's rule: a file of a
    pending instant is in progress; a file of a completed write must be named by its write stats
    (base files, and log files where their name carries the writer's instant: table version 8+);
    a file of an instant the active timeline does not know is orphaned unless it is older than
    the active timeline (an archived write: not looked up). ``None``: not looked for, the table
    has more than ``max_partitions`` partitions."""
    if len(state.listing.list_partitions()) > max_partitions:  # the planning listing's count: no request
        return None
    listing = _storage_listing(state)
    partitions = listing.list_partitions()
    if len(partitions) > max_partitions:  # storage holds more partitions than the metadata table knows
        return None
    timeline = state.timeline
    writer_named_logs = state.config.timeline_layout_version >= 2
    written = _WrittenFiles(timeline)
    orphans = []
    for partition, entries in sorted(listing.list_files(partitions).items()):
        for name, size in entries:
            stored = StoredFile(partition, name, size)
            base = BaseFile.parse(name, size)
            log = LogFile.parse(name, size) if base is None else None
            if base is None and log is None:
                continue  # not a data file (a marker, a bootstrap index, ...)
            instant = base.instant if base is not None else log.instant  # type: ignore[union-attr]
            if timeline.is_pending(instant):
                continue
            completed = timeline.get(instant)
            if completed is None:
                if not timeline.is_committed(instant):
                    orphans.append(stored)
                continue
            named = base is not None or (writer_named_logs and not log.is_cdc)  # type: ignore[union-attr]
            paths = written.of(completed) if named and completed.action in ("commit", "deltacommit", "replacecommit") \
                else None
            if paths is not None and stored.path not in paths:
                orphans.append(stored)
    return orphans


__all__ = [
    "COMMITS_RETAINED_KEY",
    "DEFAULT_COMMITS_RETAINED",
    "MAX_LISTED_PARTITIONS",
    "OlderSlice",
    "ReplacedGroup",
    "Retention",
    "StoredFile",
    "cleanable_slices",
    "older_slices",
    "orphaned_files",
    "replaced_groups",
    "retention",
]
