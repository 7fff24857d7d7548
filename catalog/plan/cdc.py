"""Planning a CDC query: the commits of the range -> the changes of each file group -> splits.

Follows Hudi's ``HoodieCDCExtractor`` (format doc 2.4 for the write stats it reads):

* the commits are the completed ``commit``/``deltacommit``/``replacecommit`` instants whose
  requested time lies in ``(start, end]`` and whose operation changes data (inserts, upserts,
  deletes, bulk inserts, overwrites, bootstrap: compaction and clustering are skipped, they move
  records without changing them);
* each write stat of such a commit is one change of its file group: the ``.cdc`` log files it
  lists (``cdcStats``) when there are any; else a new base file of inserts only, a delete that
  left the group empty, or a merge-on-read log file whose changes are found by comparing the
  group's rows before and after the commit. A base-file rewrite without ``.cdc`` files cannot be
  told apart from a rewrite of unchanged rows and is refused, as Hudi does;
* each file group a replacecommit retired is one more change: all its rows are deleted.

One split per file group: a group's changes must be read in commit order, each one's before
image being the previous one's after image.
"""

from __future__ import annotations

import posixpath
from typing import Any, Iterable

from catalog.errors import UnsupportedTableError
from catalog.plan.options import ResolvedRead
from catalog.state import TableState
from catalog.table.cdc import LOGGING_MODES, OP_KEY_ONLY, CdcPlan, ChangeKind, FileGroupChange
from catalog.table.files import BaseFile, FileSlice, Split

#: Operations whose commits a CDC query reads (Hudi's ``WriteOperationType.yieldChanges``).
DATA_CHANGE_OPERATIONS = frozenset(
    {
        "insert",
        "upsert",
        "upsert_prepped",
        "delete",
        "delete_prepped",
        "bulk_insert",
        "delete_partition",
        "insert_overwrite",
        "insert_overwrite_table",
        "bootstrap",
    }
)
_DELETES = frozenset({"delete", "delete_prepped"})


def check_cdc_table(state: TableState) -> str:
    """The table's CDC logging mode, or an error naming why CDC queries cannot read it.

    Raises:
        UnsupportedTableError: CDC is not enabled (Hudi refuses these tables too), meta fields
            are not populated (no record keys to compare), the logging mode is unknown, or the
            table drops its partition columns from the data files.
    """
    config = state.config
    if not config.cdc_enabled:
        raise UnsupportedTableError(
            f"{state.storage.uri} is not a CDC table: CDC queries need "  # a server names its table instead
            "hoodie.table.cdc.enabled=true when the table is written"
        )
    if not config.populate_meta_fields:
        raise UnsupportedTableError("CDC queries are not supported when meta fields are disabled")
    if config.drop_partition_columns:
        raise UnsupportedTableError(
            "CDC queries of a table that leaves its partition columns out of the data files "
            "(hoodie.datasource.write.drop.partition.columns) are not supported: Hudi's change images leave "
            "those columns out of some images and null in others"
        )
    mode = config.cdc_logging_mode
    if mode not in LOGGING_MODES:
        raise UnsupportedTableError(f"CDC supplemental logging mode {mode!r} is not supported")
    return mode


def plan_changes(state: TableState, resolved: ResolvedRead) -> tuple[CdcPlan, list[Split]]:
    """The changes of the CDC query ``resolved`` per file group, and one split per group."""
    mode = check_cdc_table(state)
    planner = _ChangePlanner(state, mode)
    for requested in resolved.incremental_instants:
        planner.add_commit(requested)
    options = resolved.options
    plan = CdcPlan(options.start, options.end, mode, {k: tuple(v) for k, v in planner.changes.items()})
    return plan, _splits(plan, planner.sizes, planner.rows)


def instant_before(instant: str) -> str:
    """The greatest instant of the same length sorting before ``instant``: reading "as of" it
    sees every commit strictly before ``instant``."""
    return str(int(instant) - 1).zfill(len(instant))


class _ChangePlanner:
    """Collects the changes of the range's commits, group by group, oldest commit first."""

    def __init__(self, state: TableState, mode: str):
        self.state = state
        self.mode = mode
        self.changes: dict[tuple[str, str], list[FileGroupChange]] = {}
        self.sizes: dict[tuple[str, str], int] = {}
        self.rows: dict[tuple[str, str], int] = {}
        self._files: dict[str, list[tuple[str, int]]] = {}

    def add_commit(self, requested: str) -> None:
        timeline = self.state.timeline
        instant = timeline.get(requested)
        if instant is None:
            return
        meta = timeline.commit_metadata(instant)
        operation = str(meta.get("operationType") or "").lower()
        if operation not in DATA_CHANGE_OPERATIONS:
            return
        seen_logs: set[tuple[str, str]] = set()
        for partition, stats in (meta.get("partitionToWriteStats") or {}).items():
            for stat in stats or []:
                file_id = stat.get("fileId")
                if not file_id:
                    continue
                group = (partition or "", file_id)
                change = self._from_write_stat(group, requested, stat, operation)
                if change.kind is ChangeKind.LOG_FILE:
                    if group in seen_logs:  # several log files of one commit: one comparison
                        continue
                    seen_logs.add(group)
                self._add(group, change, _stat_bytes(stat), _stat_rows(stat))
        for partition, file_ids in (meta.get("partitionToReplaceFileIds") or {}).items():
            for file_id in file_ids or []:
                group = (partition or "", file_id)
                last = self._slice(group, instant_before(requested))
                if last is not None:
                    change = FileGroupChange(
                        requested, ChangeKind.REPLACED, before=last, before_instant=instant_before(requested)
                    )
                    self._add(group, change, last.total_size, 0)

    def _add(self, group: tuple[str, str], change: FileGroupChange, nbytes: int, rows: int) -> None:
        self.changes.setdefault(group, []).append(change)
        self.sizes[group] = self.sizes.get(group, 0) + nbytes
        self.rows[group] = self.rows.get(group, 0) + rows

    def _from_write_stat(
        self, group: tuple[str, str], requested: str, stat: dict[str, Any], operation: str
    ) -> FileGroupChange:
        before_instant = instant_before(requested)
        cdc_files = tuple(sorted((stat.get("cdcStats") or {}).keys()))
        if cdc_files:
            if self.mode == "DATA_BEFORE_AFTER":
                return FileGroupChange(requested, ChangeKind.CDC_LOG, cdc_files)
            before = self._slice(group, before_instant) if self.mode == OP_KEY_ONLY else None
            after = self._slice(group, requested)
            return FileGroupChange(
                requested, ChangeKind.CDC_LOG, cdc_files, before, before_instant, after, requested
            )
        path = str(stat.get("path") or "")
        base = BaseFile.parse(posixpath.basename(path), int(stat.get("fileSizeInBytes") or 0))
        if base is not None:
            writes, deletes = _count(stat, "numWrites"), _count(stat, "numDeletes")
            if operation in _DELETES and writes == 0 and deletes != 0:
                before = self._required_slice(group, before_instant, requested)
                kind = ChangeKind.BASE_FILE_DELETE
                return FileGroupChange(requested, kind, before=before, before_instant=before_instant)
            if _count(stat, "numUpdateWrites") == 0 and deletes == 0 and writes == _count(stat, "numInserts"):
                after = FileSlice(group[0], group[1], base.instant, base)
                return FileGroupChange(requested, ChangeKind.BASE_FILE_INSERT, after=after, after_instant=requested)
            raise UnsupportedTableError(
                f"commit {requested} rewrote file group {group[1]} without a CDC log file; "
                "its changes cannot be told from its unchanged rows"
            )
        before = self._slice(group, before_instant)
        after = self._required_slice(group, requested, requested)
        return FileGroupChange(requested, ChangeKind.LOG_FILE, (), before, before_instant, after, requested)

    def _partition_files(self, partition: str) -> list[tuple[str, int]]:
        files = self._files.get(partition)
        if files is None:
            files = self.state.listing.list_files([partition]).get(partition, [])
            self._files[partition] = files
        return files

    def _slice(self, group: tuple[str, str], as_of: str) -> FileSlice | None:
        partition, file_id = group
        return self.state.fs_view.group_slice(partition, file_id, as_of, self._partition_files(partition))

    def _required_slice(self, group: tuple[str, str], as_of: str, commit: str) -> FileSlice:
        found = self._slice(group, as_of)
        if found is None:
            raise UnsupportedTableError(
                f"CDC query: the files of file group {group[1]} as of commit {commit} are gone "
                "(cleaned); query a more recent range"
            )
        return found


def _count(stat: dict[str, Any], name: str) -> int:
    value = stat.get(name)
    return int(value) if value is not None else 0


def _stat_bytes(stat: dict[str, Any]) -> int:
    cdc = sum(int(v or 0) for v in (stat.get("cdcStats") or {}).values())
    return _count(stat, "fileSizeInBytes") + cdc


def _stat_rows(stat: dict[str, Any]) -> int:
    return _count(stat, "numInserts") + _count(stat, "numUpdateWrites") + _count(stat, "numDeletes")


def _splits(plan: CdcPlan, sizes: dict[tuple[str, str], int], rows: dict[tuple[str, str], int]) -> list[Split]:
    groups: Iterable[tuple[str, str]] = sorted(plan.changes)
    total = sum(sizes.values())
    count = len(plan.changes)
    out = []
    for partition, file_id in groups:
        nbytes = sizes.get((partition, file_id), 0)
        weight = nbytes / total if total else 1.0 / count
        slice_ = FileSlice(partition, file_id, "")
        out.append(Split(slice_, nbytes, rows.get((partition, file_id), 0), max(weight, 1e-6)))
    return out


__all__ = ["DATA_CHANGE_OPERATIONS", "check_cdc_table", "instant_before", "plan_changes"]
