"""File groups and file slices as of an instant (format doc sections 3.3-3.7, 2.6).

Rules kept here, in one place:

* a base file counts when its instant is committed (completed, or older than the active
  timeline) and, for time travel, requested at or before the query instant;
* log files: table version 6 names them by the slice's base instant, so a log joins the slice
  with that base instant (uncommitted blocks are dropped later, per block); version 8+ names them
  by the writer's instant, which must be committed, and the log joins the slice with the largest
  base instant <= the log's completion time (3.5);
* a pending compaction at ``P`` opens a slice at ``P`` without base file; readers see it merged
  with the previous slice (previous base, previous logs, then the new logs);
* file groups retired by a completed replacecommit at or before the query instant are hidden.

The ``hudi`` package compares *requested* times for time travel on every table version
(format doc 3.6); ``_visible`` is the single place that rule lives.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterator, Protocol, Sequence

from catalog.table.config import TableConfig
from catalog.table.files import BaseFile, FileSlice, LogFile
from catalog.timeline import Timeline


class FileListing(Protocol):
    """Where a table's files are: partitions and their files, NOT filtered by the timeline.

    Implemented by storage listing and by the metadata-table listing (``catalog.listing``).
    """

    def list_partitions(self) -> list[str]:
        """Relative partition paths; ``""`` for a non-partitioned table."""
        ...

    def list_files(self, partitions: Sequence[str]) -> dict[str, list[tuple[str, int]]]:
        """Partition -> [(file name, size in bytes)], base and log files alike."""
        ...

    def estimated_bytes(self) -> int:
        """Approximate memory of what the listing keeps (for caches bounded in bytes)."""
        ...


@dataclass
class FileGroup:
    """All committed slices of one file group, oldest base instant first."""

    partition: str
    file_id: str
    slices: list[FileSlice] = field(default_factory=list)


def _visible(instant: str, as_of: str | None) -> bool:
    return as_of is None or instant <= as_of


class FileSystemView:
    """Builds file groups and slices from a FileListing and the timeline."""

    def __init__(self, config: TableConfig, timeline: Timeline, listing: FileListing):
        self.config = config
        self.timeline = timeline
        self.listing = listing
        self._plans: dict[str, set[tuple[str, str]]] | None = None
        self._latest_memo: dict[tuple[str, str | None, bool], list[FileSlice]] = {}
        self._memo_lock = threading.Lock()
        self.memo_files = 0

    # -- public -------------------------------------------------------------------------
    def latest_file_slices(
        self, partitions: Sequence[str], as_of: str | None, read_optimized: bool = False
    ) -> Iterator[FileSlice]:
        """The slice to read per live file group, partition by partition.

        Reads of the latest commit are remembered per partition (this view describes one
        timeline, so they cannot change); time travel is computed each time.
        """
        latest = self.timeline.latest_commit
        if as_of is not None and (latest is None or as_of < latest.requested_time):
            yield from self._latest_slices(partitions, as_of, read_optimized)
            return
        missing = [p for p in dict.fromkeys(partitions) if (p, as_of, read_optimized) not in self._latest_memo]
        if missing:
            found: dict[str, list[FileSlice]] = {p: [] for p in missing}
            for fs in self._latest_slices(missing, as_of, read_optimized):
                found[fs.partition].append(fs)
            with self._memo_lock:
                for p, slices in found.items():
                    self._latest_memo[(p, as_of, read_optimized)] = slices
                    self.memo_files += 1 + sum(1 + len(fs.log_files) for fs in slices)
        for p in partitions:
            yield from self._latest_memo[(p, as_of, read_optimized)]

    def _latest_slices(self, partitions: Sequence[str], as_of: str | None, read_optimized: bool) -> Iterator[FileSlice]:
        for group in self.file_groups(partitions, as_of):
            chosen = self._latest(group, read_optimized)
            if chosen is not None:
                yield chosen

    def file_groups(self, partitions: Sequence[str], as_of: str | None = None) -> Iterator[FileGroup]:
        """Live (not replaced) file groups with their committed slices as of ``as_of``."""
        replaced = self.timeline.replaced_file_groups(as_of)
        files = self.listing.list_files(list(partitions))
        for partition in partitions:
            retired = replaced.get(partition, set())
            for group in self._build_groups(partition, files.get(partition, []), as_of):
                if group.file_id not in retired:
                    yield group

    def group_slice(
        self, partition: str, file_id: str, as_of: str, files: Sequence[tuple[str, int]] | None = None
    ) -> FileSlice | None:
        """The latest committed slice of one file group as of ``as_of``, replaced or not (a CDC
        query reads the last rows of groups that a replacecommit retired).

        ``files``: the partition's ``(name, size)`` listing when the caller already has it.
        """
        entries = files if files is not None else self.listing.list_files([partition]).get(partition, [])
        for group in self._build_groups(partition, list(entries), as_of):
            if group.file_id == file_id:
                return self._latest(group, False)
        return None

    def latest_slice(self, group: FileGroup) -> FileSlice | None:
        """The slice a snapshot read of ``group`` reads (a pending compaction's slice merged with
        the one before it)."""
        return self._latest(group, False)

    def pending_compaction(self, group: FileGroup) -> str | None:
        """The requested time of the pending compaction whose plan covers ``group``, if any."""
        pending = [
            s.base_instant for s in group.slices if s.base_file is None and self._is_pending_compaction(s.base_instant)
        ]
        return pending[-1] if pending else None

    # -- slice assembly -----------------------------------------------------------------
    def _build_groups(self, partition: str, entries: list[tuple[str, int]], as_of: str | None) -> list[FileGroup]:
        bases: dict[str, list[BaseFile]] = {}
        logs: dict[str, list[LogFile]] = {}
        for name, size in entries:
            base = BaseFile.parse(name, size)
            if base is not None:
                if self._base_counts(base, as_of):
                    bases.setdefault(base.file_id, []).append(base)
                continue
            log = LogFile.parse(name, size)
            if log is not None and not log.is_cdc and self._log_counts(log, as_of):
                logs.setdefault(log.file_id, []).append(log)
        groups = []
        for file_id in sorted(set(bases) | set(logs)):
            groups.append(self._group(partition, file_id, bases.get(file_id, []), logs.get(file_id, []), as_of))
        return groups

    def _group(
        self, partition: str, file_id: str, bases: list[BaseFile], logs: list[LogFile], as_of: str | None
    ) -> FileGroup:
        slices: dict[str, FileSlice] = {}
        for base in bases:
            # Two base files with one instant (a retried write) cannot both be committed; keep the last name.
            slices[base.instant] = FileSlice(partition, file_id, base.instant, base)
        for instant in self._pending_compactions(partition, file_id, as_of):
            slices.setdefault(instant, FileSlice(partition, file_id, instant))
        layout2 = self.config.timeline_layout_version >= 2
        for log in sorted(logs, key=self._log_order):
            key = self._slice_key_for_log(log, sorted(slices)) if layout2 else log.instant
            if key not in slices:
                slices[key] = FileSlice(partition, file_id, key)
            slices[key].log_files.append(log)
        return FileGroup(partition, file_id, [slices[k] for k in sorted(slices)])

    def _latest(self, group: FileGroup, read_optimized: bool) -> FileSlice | None:
        if not group.slices:
            return None
        if read_optimized:
            for fs in reversed(group.slices):
                if fs.base_file is not None:
                    return FileSlice(fs.partition, fs.file_id, fs.base_instant, fs.base_file)
            return None
        latest = group.slices[-1]
        if latest.base_file is None and len(group.slices) > 1 and self._is_pending_compaction(latest.base_instant):
            prev = group.slices[-2]
            return FileSlice(
                latest.partition, latest.file_id, prev.base_instant, prev.base_file, prev.log_files + latest.log_files
            )
        return latest

    # -- instant rules ------------------------------------------------------------------
    def _base_counts(self, base: BaseFile, as_of: str | None) -> bool:
        return self.timeline.is_committed(base.instant) and _visible(base.instant, as_of)

    def _log_counts(self, log: LogFile, as_of: str | None) -> bool:
        if not _visible(log.instant, as_of):
            return False
        if self.config.timeline_layout_version >= 2:
            return self.timeline.is_committed(log.instant)
        # v6: the name holds the base instant; blocks are checked one by one when read.
        return self.timeline.is_committed(log.instant) or self._is_pending_compaction(log.instant)

    def _log_completion(self, log: LogFile) -> str:
        return self.timeline.completion_time(log.instant) or log.instant

    def _log_order(self, log: LogFile) -> tuple[str, int, str]:
        first = self._log_completion(log) if self.config.timeline_layout_version >= 2 else log.instant
        return (first, log.version, log.write_token)

    def _slice_key_for_log(self, log: LogFile, keys: list[str]) -> str:
        pos = bisect.bisect_right(keys, self._log_completion(log))
        return keys[pos - 1] if pos else log.instant

    def _is_pending_compaction(self, instant: str) -> bool:
        return instant in self._pending_compaction_times

    @cached_property
    def _pending_compaction_times(self) -> frozenset[str]:
        return frozenset(i.requested_time for i in self.timeline.pending_instants("compaction"))

    def _pending_compactions(self, partition: str, file_id: str, as_of: str | None) -> list[str]:
        """Pending compaction instants whose plan covers this file group (layout 2 needs the plan)."""
        if self._plans is None:
            self._plans = {}
            for inst in self.timeline.pending_instants("compaction"):
                plan = self.timeline.requested_file(inst)
                ops = plan.get("operations") or []
                self._plans[inst.requested_time] = {(op.get("partitionPath") or "", op.get("fileId")) for op in ops}
        return [p for p, groups in self._plans.items() if (partition, file_id) in groups and _visible(p, as_of)]


__all__ = ["FileGroup", "FileListing", "FileSystemView"]
