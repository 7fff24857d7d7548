"""Planning through the metadata table: a FileListing plus stats / record-index pruning.

:class:`MetadataTableListing` answers ``list_partitions`` / ``list_files`` from the MDT ``files``
partition (format doc 6.6) with a handful of requests, whatever the partition count. It also
offers the two optional pruning capabilities of the FileListing protocol (``catalog.listing``):

* ``prune_partitions``: ``partition_stats`` ranges (6.7), only when the query reads the latest
  commit (the stats describe the latest state, not older ones);
* ``prune_slices``: ``column_stats`` ranges per file (time-travel safe: stats are per file name;
  a slice is dropped only if *every* one of its files is proven empty) and, when enabled, the
  ``record_index`` for ``=`` / ``in`` filters on a single string record key (latest commit only).

The record index holds one location per key, so it is exact only when keys are unique
table-wide. Hudi's upserts keep them unique; a plain ``INSERT`` into a table that already has
rows does not (the ``v9_timebasedkeygen_*`` fixtures hold TXN-001 twice, in two partitions), and
pruning by the index would then drop rows that a full scan returns. ``use_record_index=None``
(the default) therefore uses the index only when :func:`keys_are_unique` proves it from the
timeline: every write after the first is an upsert, delete, compaction, clustering or overwrite.
``True`` forces it (Java's reader behaviour with ``hoodie.metadata.record.index.enable=true``),
``False`` never uses it.

Pruning never raises for a bad or missing index: it warns and keeps everything.
:func:`choose_listing` picks this listing or falls back to storage listing with a
:class:`MetadataTableFallbackWarning`.
"""

from __future__ import annotations

import warnings
from typing import Any, Iterable, Sequence

import pyarrow as pa

from .config import TableConfig
from .exceptions import HudiError, MetadataTableFallbackWarning
from .file_slices import FileSlice
from .filters import BoundFilter, stats_may_match
from .listing import FileListing, StorageListing
from .metadata_table import (
    ALL_PARTITIONS_KEY,
    COLUMN_STATS,
    FILES,
    NON_PARTITIONED_KEY,
    PARTITION_STATS,
    RECORD_INDEX,
    KeySelection,
    MetadataTable,
    MetadataTableError,
    column_hash,
    live_files,
    partition_hash,
    stats_value,
)
from .storage import Storage
from .timeline import Timeline


def _mdt_key(partition: str) -> str:
    return partition or NON_PARTITIONED_KEY


class MetadataTableListing:
    """A FileListing backed by the MDT ``files`` partition, read once and cached."""

    def __init__(self, mdt: MetadataTable, use_record_index: bool | None = None):
        self.mdt = mdt
        self._use_record_index = use_record_index
        usable = mdt.data_config.usable_metadata_partitions
        self.indexes = frozenset(p for p in (COLUMN_STATS, PARTITION_STATS, RECORD_INDEX) if p in usable)
        self._files = mdt.read(FILES)
        if ALL_PARTITIONS_KEY not in self._files:
            raise MetadataTableError(f"{mdt.storage.uri}: files partition has no {ALL_PARTITIONS_KEY} record")

    # -- FileListing --------------------------------------------------------------------
    def list_partitions(self) -> list[str]:
        names = live_files(self._files[ALL_PARTITIONS_KEY])
        if not self.mdt.data_config.is_partitioned:
            return [""]
        return sorted("" if p == NON_PARTITIONED_KEY else p for p in names)

    def list_files(self, partitions: Sequence[str]) -> dict[str, list[tuple[str, int]]]:
        return {p: sorted(live_files(self._files.get(_mdt_key(p))).items()) for p in partitions}

    # -- pruning capabilities -------------------------------------------------------------
    def prune_partitions(
        self, partitions: Sequence[str], filters: Sequence[BoundFilter], instant: str | None = None
    ) -> list[str]:
        """Partitions whose ``partition_stats`` may match (all of them when stats are unusable)."""
        columns = _stats_columns(filters)
        if PARTITION_STATS not in self.indexes or not columns or not self._is_latest(instant):
            return list(partitions)
        prefixes = [column_hash(c) + partition_hash(p) for c in columns for p in partitions]
        stats = self._read_or_warn(PARTITION_STATS, prefixes)
        if stats is None:
            return list(partitions)
        by_partition: dict[str, list[dict[str, Any]]] = {}
        for rec in stats.values():
            info = rec.get("ColumnStatsMetadata")
            if info is not None and not info.get("isDeleted"):
                by_partition.setdefault(_from_mdt(info["fileName"]), []).append(info)
        return [p for p in partitions if _may_match(by_partition.get(p, ()), filters)]

    def prune_slices(
        self, slices: Sequence[FileSlice], filters: Sequence[BoundFilter], instant: str | None = None
    ) -> list[FileSlice]:
        """Slices that may hold matching rows (record index, then column stats)."""
        slices = list(slices)
        if not slices or not filters:
            return slices
        slices = self._prune_by_record_index(slices, filters, instant)
        return self._prune_by_column_stats(slices, filters)

    @property
    def use_record_index(self) -> bool:
        if self._use_record_index is None:
            self._use_record_index = keys_are_unique(self.mdt.data_timeline)
        return self._use_record_index

    @use_record_index.setter
    def use_record_index(self, value: bool | None) -> None:
        self._use_record_index = value

    # -- helpers --------------------------------------------------------------------------
    def _is_latest(self, instant: str | None) -> bool:
        latest = self.mdt.data_timeline.latest_commit
        return instant is None or (latest is not None and instant >= latest.requested_time)

    def _read_or_warn(self, partition: str, prefixes: Iterable[str]) -> dict[str, dict[str, Any]] | None:
        try:
            return self.mdt.read(partition, KeySelection(prefixes=tuple(sorted(set(prefixes)))))
        except (HudiError, OSError) as err:
            warnings.warn(MetadataTableFallbackWarning(f"{partition} index not used: {err}"), stacklevel=3)
            return None

    def _prune_by_record_index(
        self, slices: list[FileSlice], filters: Sequence[BoundFilter], instant: str | None
    ) -> list[FileSlice]:
        keys = self._record_key_values(filters)
        if keys is None or RECORD_INDEX not in self.indexes or not self._is_latest(instant):
            return slices
        if not self.use_record_index:
            return slices
        try:
            located = self.mdt.record_locations(sorted(keys))
        except (HudiError, OSError) as err:
            warnings.warn(MetadataTableFallbackWarning(f"record index not used: {err}"), stacklevel=3)
            return slices
        if located is None:
            return slices
        groups = set(located.values())
        return [fs for fs in slices if (fs.partition, fs.file_id) in groups]

    def _record_key_values(self, filters: Sequence[BoundFilter]) -> set[str] | None:
        """Record keys pinned by an ``=`` / ``in`` filter on the (single, string) record key."""
        config = self.mdt.data_config
        fields = config.record_key_fields
        # complex/custom key generators may encode even one field as "field:value"; only plain keys
        if len(fields) != 1 or any(k in config.key_generator.upper() for k in ("COMPLEX", "CUSTOM")):
            return None
        out: set[str] | None = None
        for f in filters:
            if f.column != fields[0] or not pa.types.is_string(f.type) and not pa.types.is_large_string(f.type):
                continue
            if f.op == "=":
                values = {f.value.as_py()}
            elif f.op == "in":
                values = set(f.value.to_pylist())
            else:
                continue
            values.discard(None)
            out = values if out is None else out & values
        return out

    def _prune_by_column_stats(self, slices: list[FileSlice], filters: Sequence[BoundFilter]) -> list[FileSlice]:
        columns = _stats_columns(filters)
        if COLUMN_STATS not in self.indexes or not columns:
            return slices
        prefixes = [column_hash(c) + partition_hash(p) for c in columns for p in {fs.partition for fs in slices}]
        stats = self._read_or_warn(COLUMN_STATS, prefixes)
        if stats is None:
            return slices
        by_file: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for key, rec in stats.items():
            info = rec.get("ColumnStatsMetadata")
            if info is not None and not info.get("isDeleted"):
                by_file.setdefault((key[12:24], info["fileName"]), []).append(info)
        kept = []
        for fs in slices:
            names = ([fs.base_file.name] if fs.base_file else []) + [lf.name for lf in fs.log_files]
            part = partition_hash(fs.partition)
            # keep the slice unless every file has stats for a filter column and none may match
            if any(_may_match(by_file.get((part, n)), filters) for n in names):
                kept.append(fs)
        return kept


def _stats_columns(filters: Sequence[BoundFilter]) -> set[str]:
    return {f.column for f in filters}


def _from_mdt(name: str) -> str:
    return "" if name == NON_PARTITIONED_KEY else name


def _may_match(infos: Iterable[dict[str, Any]] | None, filters: Sequence[BoundFilter]) -> bool:
    """Can data described by these column-stats entries hold rows matching ``filters``?

    Missing entries, or values that do not convert to the column type, never prune.
    """
    if infos is None:
        return True
    by_column = {info["columnName"]: info for info in infos}
    for f in filters:
        info = by_column.get(f.column)
        if info is None:
            continue
        values, nulls = info.get("valueCount"), info.get("nullCount")
        if info.get("minValue") is None and info.get("maxValue") is None and not (values and nulls == values):
            continue  # no range and not provably all-null (e.g. log-file entries of type NULL)
        try:
            lo = stats_value(info.get("minValue"), info.get("valueType"), f.type)
            hi = stats_value(info.get("maxValue"), info.get("valueType"), f.type)
            if not stats_may_match([f], f.column, lo, hi, nulls, values):
                return False
        except (ValueError, TypeError, ArithmeticError, pa.ArrowException):
            continue
    return True


#: write operations after which every record key is still held once (format doc 2.4)
_KEY_PRESERVING_OPERATIONS = frozenset(
    {"UPSERT", "UPSERT_PREPPED", "DELETE", "DELETE_PREPPED", "DELETE_PARTITION", "COMPACT", "LOG_COMPACT",
     "CLUSTER", "INSERT_OVERWRITE", "INSERT_OVERWRITE_TABLE", "INDEX", "ALTER_SCHEMA"}
)


def keys_are_unique(timeline: Timeline) -> bool:
    """Whether the timeline proves record keys unique table-wide (so the record index is exact).

    The first write may be any insert; every later write must be key-preserving. Reads one
    commit metadata per write instant, so it is evaluated lazily, only for key filters.
    """
    for inst in timeline.commits[1:]:
        operation = str(timeline.commit_metadata(inst).get("operationType") or "").upper()
        if operation not in _KEY_PRESERVING_OPERATIONS:
            return False
    return True


def choose_listing(
    storage: Storage,
    config: TableConfig,
    timeline: Timeline,
    use_metadata_table: bool,
    use_record_index: bool | None = None,
) -> FileListing:
    """The MDT listing when enabled and usable (table version 8+), else storage listing, with a
    warning when the MDT is declared usable but cannot be trusted."""
    if not use_metadata_table or FILES not in config.usable_metadata_partitions or config.table_version < 8:
        # Table version 6 MDTs (layout 1, HBase-written HFiles) are unverified: no fixture has one.
        return StorageListing(storage, config)
    try:
        mdt = MetadataTable(storage, config, timeline)
        mdt.check_in_sync()
        return MetadataTableListing(mdt, use_record_index)
    except (HudiError, OSError) as err:
        warnings.warn(MetadataTableFallbackWarning(f"planning with storage listing: {err}"), stacklevel=2)
        return StorageListing(storage, config)


__all__ = ["MetadataTableListing", "choose_listing", "keys_are_unique"]
