"""Pruners: which partitions and file slices may hold rows matching a query's filters.

Every pruner keeps anything it cannot prove empty (prune only on proof), and an index that cannot
be read is skipped with a :class:`MetadataTableFallbackWarning`, never trusted half-way.

* :class:`PartitionValuePruner`: partition values parsed from paths (plus filters on a
  timestamp-keygen source column translated into path filters, when that is exact);
* :class:`PartitionStatsPruner`: the MDT ``partition_stats`` ranges (6.7), latest commit only;
* :class:`RecordIndexPruner`: the MDT ``record_index`` for ``=`` / ``in`` on a plain record key,
  or on every field of a complex or custom key generator's key (``catalog.plan.composite_keys``),
  latest commit only, and only where the timeline proves keys unique (:func:`keys_are_unique`);
* :class:`SecondaryIndexPruner`: an MDT secondary index for ``=`` / ``in`` / ``is null`` on its
  column, then the record index for the groups of the keys found (latest commit only, and only
  where the record index is used; ``catalog.plan.secondary_index``);
* :class:`ColumnStatsPruner`: the MDT ``column_stats`` ranges per file (time-travel safe: stats
  are per file name; a slice is dropped only if *every* one of its files is proven empty);
* :class:`BloomFilterPruner`: the MDT ``bloom_filters`` of base files for ``=`` / ``in`` on a
  plain record key, and (copy-on-write) bloom-filter expression indexes for ``=`` / ``in`` on
  their string column (time-travel safe, per file name): a slice is dropped only if its base file's filter rules every
  value out and it has no log file (read-optimized reads ignore log files).

The record index holds one location per key, so it is exact only when keys are unique
table-wide. Hudi's upserts keep them unique; a plain ``INSERT`` into a table that already has
rows does not (the ``v9_timebasedkeygen_*`` fixtures hold TXN-001 twice, in two partitions), and
pruning by the index would then drop rows a full scan returns. ``use_record_index=None`` (the
default) therefore uses it only when the timeline proves uniqueness; ``True`` forces it (Java's
behaviour with ``hoodie.metadata.record.index.enable=true``), ``False`` never uses it.
"""

from __future__ import annotations

import warnings
from datetime import datetime, timezone
from typing import Any, Iterable, Protocol, Sequence
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pyarrow as pa

from catalog.errors import HudiError, MetadataTableFallbackWarning
from catalog.listing.bloom_filters import BLOOM_FILTERS, EXPRESSION_INDEX_PREFIX, base_file_filters
from catalog.listing.metadata_table import (
    COLUMN_STATS,
    NON_PARTITIONED_KEY,
    PARTITION_STATS,
    RECORD_INDEX,
    KeySelection,
    MetadataTable,
    column_hash,
    partition_hash,
    stats_value,
)
from catalog.plan.composite_keys import composite_keys
from catalog.plan.filters import BoundFilter, filter_table, stats_may_match
from catalog.plan.secondary_index import SecondaryIndex, record_keys, secondary_indexes
from catalog.table.config import TableConfig
from catalog.table.files import FileSlice
from catalog.table.partitions import PARTITION_PATH_COLUMN, PartitionScheme
from catalog.timeline import Timeline


class PartitionPruner(Protocol):
    def prune(self, partitions: Sequence[str], filters: Sequence[BoundFilter]) -> list[str]:
        """The partitions that may hold matching rows."""
        ...


class SlicePruner(Protocol):
    def prune(self, slices: Sequence[FileSlice], filters: Sequence[BoundFilter]) -> list[FileSlice]:
        """The file slices that may hold matching rows."""
        ...


# -- partition values -------------------------------------------------------------------------
_EPOCH_UNITS = {"EPOCHMILLISECONDS": 1_000, "UNIX_TIMESTAMP": 1, "EPOCHMICROSECONDS": 1_000_000}
_DATE_TOKENS = {"yyyy": "%Y", "MM": "%m", "dd": "%d", "HH": "%H", "mm": "%M", "ss": "%S"}
_TOKEN_ORDER = list(_DATE_TOKENS)


def _monotonic_strftime(java_format: str) -> str | None:
    """A strftime pattern for a Java date format whose output sorts like time itself.

    Only fixed-width numeric fields from years down, in order, separated by non-letter,
    non-digit literals qualify (``yyyy/MM/dd/HH``, ``yyyy-MM-dd``); anything else returns None.
    """
    out, rank, i = [], -1, 0
    while i < len(java_format):
        token = next((t for t in _TOKEN_ORDER if java_format.startswith(t, i)), None)
        if token is not None:
            if _TOKEN_ORDER.index(token) != rank + 1:
                return None
            rank += 1
            out.append(_DATE_TOKENS[token])
            i += len(token)
        elif java_format[i].isalnum() or java_format[i] in "'%":
            return None
        else:
            out.append(java_format[i])
            i += 1
    return "".join(out) if rank >= 0 else None


class TimestampPathFilters:
    """Turns filters on a timestamp-keygen source column into ``_hoodie_partition_path`` filters.

    Only when that is safe: an epoch-number source type (the value maps to one instant), an output
    format that sorts like time, and a known output time zone. Otherwise nothing is translated.
    """

    def __init__(self, config: TableConfig, schema: pa.Schema):
        self.field: str | None = None
        fields = config.partition_fields
        if not config.is_timestamp_keygen or len(fields) != 1:
            return  # every plan builds one: the usual table stops here, before reading the settings
        opts = config.timestamp_keygen_options()
        unit = _EPOCH_UNITS.get((opts.get("timestamp.type") or "").upper())
        pattern = _monotonic_strftime(opts.get("output.dateformat") or "")
        zone_name = opts.get("output.timezone") or opts.get("timezone") or "UTC"
        if not config.is_timestamp_keygen or len(fields) != 1 or unit is None or pattern is None:
            return
        if schema.get_field_index(fields[0]) < 0:
            return
        dtype = schema.field(fields[0]).type
        if not (pa.types.is_integer(dtype) or pa.types.is_string(dtype)):
            return
        # A string column (Spark may store the source that way) orders as text, not as numbers,
        # so only equality tests translate for it.
        self.ranges = pa.types.is_integer(dtype)
        try:
            self.zone = ZoneInfo(zone_name)
        except (ZoneInfoNotFoundError, ValueError):
            return
        self.field, self.unit, self.pattern = fields[0], unit, pattern

    def _path(self, value: int | str) -> str | None:
        try:
            seconds = int(value) // self.unit
        except ValueError:
            return None  # not an epoch number: that value cannot be in any partition's rows
        moment = datetime.fromtimestamp(seconds, tz=timezone.utc).astimezone(self.zone)
        return moment.strftime(self.pattern)

    def translate(self, filters: Sequence[BoundFilter]) -> list[BoundFilter]:
        out: list[BoundFilter] = []
        if self.field is None:
            return out
        string = pa.string()
        for f in filters:
            if f.column != self.field:
                continue
            if f.op == "in":
                paths = sorted({p for p in map(self._path, f.value.to_pylist()) if p is not None})
                if paths:
                    out.append(BoundFilter(PARTITION_PATH_COLUMN, "in", pa.array(paths, string), string))
                continue
            # A path is the floor of its rows' times, so strict bounds become inclusive.
            op = {"=": "=", ">": ">=", ">=": ">=", "<": "<=", "<=": "<="}.get(f.op)
            if op is None or (op != "=" and not self.ranges):
                continue
            path = self._path(f.value.as_py())
            if path is not None:
                out.append(BoundFilter(PARTITION_PATH_COLUMN, op, pa.scalar(path, string), string))
        return out




class PartitionValuePruner:
    """Prunes on the values a partition path spells (and ``_hoodie_partition_path`` itself)."""

    def __init__(self, config: TableConfig, schema: pa.Schema):
        self.scheme = PartitionScheme(config, schema)
        self.timestamp_filters = TimestampPathFilters(config, schema)
        #: the typed values of the partitions last pruned (one table state plans the same list again)
        self._values: tuple[tuple[str, ...], pa.Table] | None = None

    def prune(self, partitions: Sequence[str], filters: Sequence[BoundFilter]) -> list[str]:
        if not filters or not partitions:
            return list(partitions)
        usable = list(filters) + self.timestamp_filters.translate(filters)
        if not {f.column for f in usable} & {*self.scheme.fields, PARTITION_PATH_COLUMN}:
            return list(partitions)  # e.g. a record-key lookup: no partition value to test
        table = self._values_table(tuple(partitions))
        kept = filter_table(table, usable)
        return kept.column(PARTITION_PATH_COLUMN).to_pylist() if kept.num_rows != table.num_rows else list(partitions)

    def _values_table(self, partitions: tuple[str, ...]) -> pa.Table:
        kept = self._values
        if kept is not None and kept[0] == partitions:
            return kept[1]
        table = self.scheme.values_table(partitions)
        self._values = (partitions, table)
        return table


# -- metadata-table indexes -------------------------------------------------------------------


def _read_or_warn(mdt: MetadataTable, partition: str, prefixes: Iterable[str]) -> dict[str, dict[str, Any]] | None:
    try:
        return mdt.read(partition, KeySelection(prefixes=tuple(sorted(set(prefixes)))))
    except (HudiError, OSError) as err:
        warnings.warn(MetadataTableFallbackWarning(f"{partition} index not used: {err}"), stacklevel=4)
        return None


def _stats_partition(name: str) -> str:
    return "" if name == NON_PARTITIONED_KEY else name


class PartitionStatsPruner:
    """Prunes partitions on the MDT ``partition_stats`` ranges; they describe the latest state."""

    def __init__(self, mdt: MetadataTable):
        self.mdt = mdt

    def prune(self, partitions: Sequence[str], filters: Sequence[BoundFilter]) -> list[str]:
        columns = {f.column for f in filters}
        if not columns:
            return list(partitions)
        prefixes = [column_hash(c) + partition_hash(p) for c in columns for p in partitions]
        stats = _read_or_warn(self.mdt, PARTITION_STATS, prefixes)
        if stats is None:
            return list(partitions)
        by_partition: dict[str, list[dict[str, Any]]] = {}
        for rec in stats.values():
            info = rec.get("ColumnStatsMetadata")
            if info is not None and not info.get("isDeleted"):
                by_partition.setdefault(_stats_partition(info["fileName"]), []).append(info)
        return [p for p in partitions if _may_match(by_partition.get(p, ()), filters)]


class ColumnStatsPruner:
    """Prunes slices on per-file MDT ``column_stats`` ranges (valid at any instant)."""

    def __init__(self, mdt: MetadataTable):
        self.mdt = mdt

    def prune(self, slices: Sequence[FileSlice], filters: Sequence[BoundFilter]) -> list[FileSlice]:
        columns = {f.column for f in filters}
        if not slices or not columns:
            return list(slices)
        prefixes = [column_hash(c) + partition_hash(p) for c in columns for p in {fs.partition for fs in slices}]
        stats = _read_or_warn(self.mdt, COLUMN_STATS, prefixes)
        if stats is None:
            return list(slices)
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


class BloomFilterPruner:
    """Drops the file slices whose base file cannot hold a value a query pins: a record key
    (``=`` / ``in``) by the MDT ``bloom_filters``, a string column's value by a bloom-filter
    expression index on it (``expr_index_<name>``, identity function, Hudi 1.x).

    A base file's bloom filter holds every value written to it, so "absent" is proof for the base
    file. It says nothing about log files: an index that can index log files (bucket, record
    index, a later writer's choice) sends new keys to the log files of groups whose base file
    never held them, and the table does not record which indexes its writers used. So a slice
    with log files is kept, unless the read is read-optimized (it reads base files only). Files
    without a live, readable filter are kept. Where the record index located the keys' groups
    (``record_index``), nothing is left to prove and no record-key filter is read.
    """

    def __init__(
        self, mdt: MetadataTable, read_optimized: bool = False, record_index: RecordIndexPruner | None = None
    ):
        self.mdt = mdt
        self.read_optimized = read_optimized
        self.record_index = record_index
        self._expression_indexes: dict[str, str] | None = None

    def _lookups(self, filters: Sequence[BoundFilter]) -> list[tuple[str, set[str]]]:
        """(MDT partition, values of which a base file must hold one) for the usable indexes."""
        out = []
        keys = record_key_values(self.mdt.data_config, filters)
        if (keys and BLOOM_FILTERS in self.mdt.data_config.usable_metadata_partitions
                and (self.record_index is None or self.record_index.located(filters) is None)):
            out.append((BLOOM_FILTERS, keys))
        for column, index in self.expression_indexes().items():
            values = string_values(column, filters)
            if values:
                out.append((index, values))
        return out

    def expression_indexes(self) -> dict[str, str]:
        """Column -> MDT partition of its complete, identity bloom-filter expression index, on
        copy-on-write tables only: that every value of a base file is in its filter is pinned on a
        Hudi-written copy-on-write table, not on base files a merge-on-read compaction wrote."""
        if self._expression_indexes is None:
            usable = set(self.mdt.data_config.usable_metadata_partitions)
            found: dict[str, str] = {}
            if not self.mdt.data_config.is_mor and any(p.startswith(EXPRESSION_INDEX_PREFIX) for p in usable):
                for name, spec in sorted(self.mdt.index_definitions.items()):
                    fields = spec.get("sourceFields") or []
                    if (name in usable and spec.get("indexType") == BLOOM_FILTERS
                            and spec.get("indexFunction") == "identity" and len(fields) == 1
                            and isinstance(fields[0], str)):
                        found.setdefault(fields[0], name)
            self._expression_indexes = found
        return self._expression_indexes

    def prune(self, slices: Sequence[FileSlice], filters: Sequence[BoundFilter]) -> list[FileSlice]:
        if not slices or not any(f.op in ("=", "in") for f in filters):
            return list(slices)
        testable = {
            (fs.partition, fs.base_file.name)
            for fs in slices
            if fs.base_file is not None and (self.read_optimized or not fs.log_files)
        }
        ruled_out: set[tuple[str, str]] = set()
        try:
            for index, values in self._lookups(filters) if testable else ():
                found = base_file_filters(self.mdt, testable - ruled_out, index)
                ruled_out |= {file for file, bloom in found.items() if not any(bloom.might_contain(v) for v in values)}
        except (HudiError, OSError) as err:
            warnings.warn(MetadataTableFallbackWarning(f"bloom filter index not used: {err}"), stacklevel=3)
            return list(slices)
        return [fs for fs in slices if fs.base_file is None or (fs.partition, fs.base_file.name) not in ruled_out]


class FileGroupIndexPruner:
    """Keeps the file groups an MDT index locates for the query's filters (latest commit only).

    Subclasses say where the rows are (:meth:`_locate`); the answer is asked once per plan (the
    partition and the slice pruning share it).
    """

    #: how warnings name the index
    name = "index"

    def __init__(self, mdt: MetadataTable):
        self.mdt = mdt
        self._memo: tuple[Sequence[BoundFilter], set[tuple[str, str]] | None] | None = None

    def _locate(self, filters: Sequence[BoundFilter]) -> set[tuple[str, str]] | None:
        raise NotImplementedError

    def located(self, filters: Sequence[BoundFilter]) -> set[tuple[str, str]] | None:
        """(partition, file id) of every group that may hold matching rows; ``None``: the index
        does not apply (an unreadable index warns and does not apply)."""
        if self._memo is not None and self._memo[0] is filters:
            return self._memo[1]
        try:
            groups = self._locate(filters)
        except (HudiError, OSError) as err:
            warnings.warn(MetadataTableFallbackWarning(f"{self.name} not used: {err}"), stacklevel=4)
            groups = None
        self._memo = (filters, groups)
        return groups

    def prune(self, slices: Sequence[FileSlice], filters: Sequence[BoundFilter]) -> list[FileSlice]:
        groups = self.located(filters) if slices else None
        if groups is None:
            return list(slices)
        return [fs for fs in slices if (fs.partition, fs.file_id) in groups]

    def prune_partitions(self, partitions: Sequence[str], filters: Sequence[BoundFilter]) -> list[str]:
        """Only the partitions holding located groups: their slices alone need to be built."""
        groups = self.located(filters)
        if groups is None:
            return list(partitions)
        wanted = {p for p, _ in groups}
        return [p for p in partitions if p in wanted]


class RecordIndexPruner(FileGroupIndexPruner):
    """Keeps the file groups the MDT ``record_index`` locates for the query's record keys (plain,
    or spelled from the fields of a composite key)."""

    name = "record index"

    def __init__(self, mdt: MetadataTable, use_record_index: bool | None = None):
        super().__init__(mdt)
        self._use = use_record_index

    @property
    def enabled(self) -> bool:
        if self._use is None:
            self._use = keys_are_unique(self.mdt.data_timeline)
        return self._use

    def _locate(self, filters: Sequence[BoundFilter]) -> set[tuple[str, str]] | None:
        config = self.mdt.data_config
        keys = record_key_values(config, filters)
        if keys is None:
            keys = composite_keys(config, filters)
        if keys is None or not self.enabled:
            return None
        return self.groups_of(keys)

    def groups_of(self, keys: Iterable[str]) -> set[tuple[str, str]] | None:
        """(partition, file id) of the groups holding ``keys``; ``None`` for an unknown layout."""
        located = self.mdt.record_locations(sorted(keys))
        return set(located.values()) if located is not None else None


class SecondaryIndexPruner(FileGroupIndexPruner):
    """Keeps the file groups holding the rows an MDT secondary index finds for ``=`` / ``in`` /
    ``is null`` filters on its column: their record keys, then their groups by the record index
    (so only where the record index is used, see :class:`RecordIndexPruner`)."""

    name = "secondary index"

    def __init__(self, mdt: MetadataTable, record_index: RecordIndexPruner):
        super().__init__(mdt)
        self.record_index = record_index
        self._indexes: dict[str, SecondaryIndex] | None = None

    def _locate(self, filters: Sequence[BoundFilter]) -> set[tuple[str, str]] | None:
        if not any(f.op in ("=", "in", "is null") for f in filters):
            return None
        if self._indexes is None:
            self._indexes = secondary_indexes(self.mdt)
        groups: set[tuple[str, str]] | None = None
        for f in filters:
            index = self._indexes.get(f.column)
            prefixes = index.prefixes(f) if index is not None else None
            if index is None or prefixes is None or not self.record_index.enabled:
                continue
            keys = record_keys(self.mdt, index, prefixes)
            found = self.record_index.groups_of(keys) if keys is not None else None
            if found is not None:
                groups = found if groups is None else groups & found
        return groups


def record_key_values(config: TableConfig, filters: Sequence[BoundFilter]) -> set[str] | None:
    """Record keys pinned by an ``=`` / ``in`` filter on the (single, string) record key."""
    fields = config.record_key_fields
    # complex/custom key generators may encode even one field as "field:value"; only plain keys
    if len(fields) != 1 or any(k in config.key_generator.upper() for k in ("COMPLEX", "CUSTOM")):
        return None
    return string_values(fields[0], filters)


def string_values(column: str, filters: Sequence[BoundFilter]) -> set[str] | None:
    """The strings ``=`` / ``in`` filters on the string ``column`` pin (intersected); ``None``
    when no such filter names it."""
    out: set[str] | None = None
    for f in filters:
        if f.column != column or not (pa.types.is_string(f.type) or pa.types.is_large_string(f.type)):
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



class _IndexPartitions:
    """A file-group index as a partition pruner (see :meth:`FileGroupIndexPruner.prune_partitions`)."""

    def __init__(self, index: FileGroupIndexPruner):
        self.index = index

    def prune(self, partitions: Sequence[str], filters: Sequence[BoundFilter]) -> list[str]:
        return self.index.prune_partitions(partitions, filters)


def index_pruners(
    mdt: MetadataTable | None, at_latest: bool, use_record_index: bool | None, read_optimized: bool = False
) -> tuple[list[PartitionPruner], list[SlicePruner]]:
    """The MDT index pruners usable for a query; ``at_latest``: it reads the latest commit.

    A read-optimized query reads base files only: a row a log file later updated or deleted is
    still in them, while the record and secondary indexes already say where it is now (or that
    it is gone), so they are not used for it. Nor are a merge-on-read table's secondary indexes:
    Hudi 1.1 leaves updates and deletes written to log files out of every secondary index but the
    first one created (pinned on Hudi-written tables in the tests), so an index may still name a
    value's old rows and miss its new ones."""
    if mdt is None:
        return [], []
    usable = mdt.data_config.usable_metadata_partitions
    partitions: list[PartitionPruner] = []
    slices: list[SlicePruner] = []
    record_index: RecordIndexPruner | None = None
    # Hudi 1.2 indexes no column stats of Lance base files: a Lance table's partition stats
    # describe only its log files, so they cannot rule a partition out.
    if at_latest and PARTITION_STATS in usable and mdt.data_config.base_file_format == "PARQUET":
        partitions.append(PartitionStatsPruner(mdt))
    if at_latest and not read_optimized and RECORD_INDEX in usable:
        record_index = RecordIndexPruner(mdt, use_record_index)
        partitions.append(_IndexPartitions(record_index))
        slices.append(record_index)
        if not mdt.data_config.is_mor:
            secondary = SecondaryIndexPruner(mdt, record_index)
            partitions.append(_IndexPartitions(secondary))
            slices.append(secondary)
    if COLUMN_STATS in usable:
        slices.append(ColumnStatsPruner(mdt))
    if any(p == BLOOM_FILTERS or p.startswith(EXPRESSION_INDEX_PREFIX) for p in usable):
        slices.append(BloomFilterPruner(mdt, read_optimized, record_index))
    return partitions, slices


__all__ = [
    "BloomFilterPruner",
    "ColumnStatsPruner",
    "FileGroupIndexPruner",
    "PartitionPruner",
    "PartitionStatsPruner",
    "PartitionValuePruner",
    "RecordIndexPruner",
    "SecondaryIndexPruner",
    "SlicePruner",
    "TimestampPathFilters",
    "index_pruners",
    "keys_are_unique",
    "record_key_values",
    "string_values",
]
