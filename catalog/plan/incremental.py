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
scan: the latest slices of the whole table, filtered by commit time (the planner decides, by table
version).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from catalog.fs_view import FileSystemView
from catalog.state import TableState
from catalog.timeline.instant_files import written_files


class _WrittenFilesListing:
    """A :class:`~catalog.fs_view.FileListing` of the written files that exist (name and size)."""

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
        view: a file system view of those files alone (the ones still in storage).
        complete: every one of them is still in storage (otherwise Hudi scans the whole table).
    """

    partitions: frozenset[str]
    view: FileSystemView
    complete: bool

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
        present = {
            partition: [(name, size) for name, size in listed.get(partition, []) if (partition, name) in written]
            for partition in partitions
        }
        found = sum(len(entries) for entries in present.values())
        view = FileSystemView(state.config, timeline, _WrittenFilesListing(present))
        return cls(partitions, view, complete=found == len(written))


__all__ = ["WrittenFiles"]
