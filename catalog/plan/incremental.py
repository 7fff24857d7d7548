"""The files an incremental query reads (format doc 7.5).

Hudi's incremental query does not read the latest file slices of the table: it builds its file
system view from the files the range's commits wrote (their write stats) and nothing else, takes
the latest slice of each file group of that view as of the range's last commit, merges it and
keeps the rows whose commit time is in range (Spark's ``MergeOnReadIncrementalRelation`` in 0.x,
``MergeOnReadIncrementalRelationV2`` in 1.x, both through ``listAffectedFilesForCommits``).

So a merge-on-read update written to a log file in range is merged without the base file an older
commit wrote: a late-arriving update (a lower ordering value than the stored record, which loses
the snapshot merge) is returned as the range's row with its own commit time. A range holding only
a log compaction reads the block it wrote without the blocks it compacted, which the log scan does
not apply by itself (``catalog.format.log_block.apply_log_compaction``): no rows, as Hudi 1.2.

When a file the range wrote is gone (the cleaner removed it), Hudi 1.x falls back to a full table
scan: the latest slices of the whole table, filtered by commit time. Hudi 0.x does not (its
fallback option is off by default) and fails when it reads a missing file (the planner decides,
by table version).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from catalog.fs_view import FileSystemView
from catalog.state import TableState
from catalog.timeline.instant_files import written_files


class _WrittenFilesListing:
    """A :class:`~catalog.fs_view.FileListing` of the written files (name and size)."""

    def __init__(self, files: dict[str, list[tuple[str, int]]]):
        self._files = files

    def list_partitions(self) -> list[str]:
        return sorted(self._files)

    def list_files(self, partitions: Sequence[str]) -> dict[str, list[tuple[str, int]]]:
        return {p: self._files[p] for p in partitions if p in self._files}

    def estimated_bytes(self) -> int:
        return sum(64 + len(name) for entries in self._files.values() for name, _ in entries)


@dataclass(frozen=True)
class WrittenFiles:
    """The files an incremental range's commits wrote.

    Attributes:
        partitions: the partitions they wrote to.
        view: a file system view of those files alone (sizes from the listing; 0 for missing ones).
        missing: (partition, file name) of those no longer in storage (the cleaner removed them).
    """

    partitions: frozenset[str]
    view: FileSystemView
    missing: frozenset[tuple[str, str]]

    @classmethod
    def of(cls, state: TableState, instants: Sequence[str]) -> "WrittenFiles":
        """The files the commits requested at ``instants`` wrote, looked up in the table's listing."""
        timeline = state.timeline
        written: set[tuple[str, str]] = set()
        for requested in instants:
            instant = timeline.get(requested)
            if instant is not None:
                written |= written_files(timeline.commit_metadata(instant))
        partitions = frozenset(p for p, _ in written)
        listed = state.listing.list_files(sorted(partitions))
        sizes = {(partition, name): size for partition, entries in listed.items() for name, size in entries}
        files: dict[str, list[tuple[str, int]]] = {partition: [] for partition in partitions}
        for partition, name in sorted(written):
            files[partition].append((name, sizes.get((partition, name), 0)))
        view = FileSystemView(state.config, timeline, _WrittenFilesListing(files))
        return cls(partitions, view, frozenset(written - sizes.keys()))

    def reads_missing(self, instant: str) -> bool:
        """Whether the latest slices as of ``instant`` name a file that is gone (older versions
        of a file group, and replaced file groups, are not read: their absence does not matter)."""
        if not self.missing:
            return False
        for fs in self.view.latest_file_slices(sorted(self.partitions), instant):
            names = [lf.name for lf in fs.log_files] + ([fs.base_file.name] if fs.base_file is not None else [])
            if any((fs.partition, name) in self.missing for name in names):
                return True
        return False


__all__ = ["WrittenFiles"]
