"""The rows a plan returns, from Parquet footers alone, where they decide it.

Without filters, when every planned slice is a Parquet base file without logs (a copy-on-write
snapshot, a read-optimized read), the footer row counts of the planned row groups are exactly the
rows the read returns. With filters, column statistics decide it or nothing does: the planner
already drops the row groups whose statistics prove that no row matches; when the statistics of
every row group left prove the opposite, that *every* row matches, the count is the sum of their
row counts, and no page needs decoding. Proof only, never estimation: the answer is
``None`` (count by reading) as soon as one row group is undecided, and also when

- a base file is not returned as stored (:func:`.dataset.only_decoded`: logs to merge, columns
  renamed by schema on read, partition columns filled in) or has log files at all;
- a filtered column is floating point (NaN sits outside Parquet's min/max but compares in the
  engine), of a type whose statistics are not compared here (timestamps, nested, binary), or
  stored with another type than the table's;
- a statistic or its null count is missing.

Statistics bound the values (a truncated minimum or maximum still bounds them), so each decision
below holds for every row: ``=`` needs min = max = the value, ``>=`` needs min >= the value, and
so on; a comparison is never true on a null, so those need a null count of 0.

:func:`whole_row_groups` is the one decision (the row groups whose every row the read returns, or
why it cannot say); :func:`count_rows` and ``catalog.plan.aggregates`` answer from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from catalog.plan.dataset import only_decoded
from catalog.plan.filters import BoundFilter, bind_filters
from catalog.plan.options import ReadOptions
from catalog.plan.splits import CachedFooter, FooterCache, default_footer_cache
from catalog.read.context import ReadContext
from catalog.table.files import Split


@dataclass(frozen=True)
class WholeRowGroups:
    """Row groups of one planned Parquet base file, every row of which the read returns.

    Attributes:
        split: the split they belong to.
        cached: the file's footer and row-group layout, as the footer cache keeps them.
        groups: the row groups (indexes into the footer).
    """

    split: Split
    cached: CachedFooter
    groups: tuple[int, ...]

    @property
    def footer(self) -> pq.FileMetaData:
        return self.cached.metadata

    @property
    def rows(self) -> int:
        rows = self.cached.layout.rows
        return sum(rows[g] for g in self.groups)


def whole_row_groups(
    context: ReadContext, splits: Sequence[Split], options: ReadOptions, footers: FooterCache | None = None
) -> list[WholeRowGroups] | str:
    """The planned row groups of ``splits``, when the read of ``options`` returns every row of
    each, as its Parquet base file stores them, and no other row (see the module docstring); else
    why not, in words. ``footers``: the footer cache planning used (else the process-wide one)."""
    if options.incremental or options.cdc or context.cdc is not None:
        return "an incremental or CDC query returns rows by commit"
    footers = footers if footers is not None else default_footer_cache()
    filters = bind_filters(list(options.filters), context.table_schema) if options.filters else []
    for f in filters:
        if not _comparable(f.type):
            return f"column statistics do not decide a filter on {f.column!r} ({f.type})"
    for split in splits:  # what the listing tells, before any footer is read
        file_slice = split.file_slice
        base = file_slice.base_file
        if base is None or file_slice.base_file_path is None or base.extension != "parquet":
            return "a file slice without a Parquet base file"
        if file_slice.log_files:
            return "a file slice with log files (its rows are merged)"
        if filters and not only_decoded(context, split):
            return "a base file whose rows are changed when read (schema evolution, partition values, bootstrap)"
    out = []
    for split in splits:
        base, path = split.file_slice.base_file, split.file_slice.base_file_path
        assert base is not None and path is not None  # checked above
        cached = footers.parquet(context.storage, path, base.size)
        footer = cached.metadata
        groups = tuple(split.row_groups) if split.row_groups is not None else tuple(range(footer.num_row_groups))
        if filters and not _decided(footer, groups, filters):
            return "the column statistics do not prove that every row of every planned row group matches the filters"
        out.append(WholeRowGroups(split, cached, groups))
    return out


def count_rows(
    context: ReadContext, splits: Sequence[Split], options: ReadOptions, footers: FooterCache | None = None
) -> int | None:
    """The rows a read of ``splits`` with ``options`` returns, from footers only (see the module
    docstring); ``None``: they must be read. ``footers``: the footer cache planning used (else
    the process-wide one; a split's estimated rows are no count: the planner reads no footer of
    a file it does not cut)."""
    whole = whole_row_groups(context, splits, options, footers)
    if isinstance(whole, str):
        return None
    rows = sum(w.rows for w in whole)
    return rows if options.limit is None else min(rows, options.limit)


def _decided(footer: pq.FileMetaData, groups: Sequence[int], filters: Sequence[BoundFilter]) -> bool:
    """Whether the statistics prove that every row of ``groups`` matches all ``filters``."""
    columns = _columns(footer, filters)
    if columns is None:
        return False
    for index in groups:
        group = footer.row_group(index)
        for f in filters:
            if not _all_match(f, group.column(columns[f.column]).statistics, group.num_rows):
                return False
    return True


def _comparable(dtype: pa.DataType) -> bool:
    return pa.types.is_integer(dtype) or pa.types.is_string(dtype) or pa.types.is_large_string(dtype) or (
        pa.types.is_boolean(dtype)
    )


def _columns(footer: pq.FileMetaData, filters: Sequence[BoundFilter]) -> dict[str, int] | None:
    """The column chunk index of each filtered column, when the file stores it as a top-level
    column of the filter's type; ``None`` otherwise."""
    leaves = {footer.schema.column(i).path: i for i in range(footer.num_columns)}
    stored = footer.schema.to_arrow_schema()
    out = {}
    for f in filters:
        index = stored.get_field_index(f.column)
        if f.column not in leaves or index < 0 or not stored.field(index).type.equals(f.type):
            return None  # missing or retyped
        out[f.column] = leaves[f.column]
    return out


def _all_match(f: BoundFilter, stats: pq.Statistics | None, rows: int) -> bool:
    """Whether the statistics prove that all ``rows`` of the row group match ``f``."""
    if stats is None or not stats.has_null_count:
        return False
    nulls = stats.null_count
    if f.op == "is null":
        return bool(nulls == rows)
    if f.op == "is not null":
        return bool(nulls == 0)
    if nulls != 0 or not stats.has_min_max:
        return False
    try:
        lo, hi = pa.scalar(stats.min, f.type), pa.scalar(stats.max, f.type)
    except (pa.ArrowException, TypeError, ValueError):  # e.g. a string statistic that is not UTF-8
        return False
    value = f.value
    if f.op in ("in", "not in"):
        values = [v for v in value if v.is_valid]
        if f.op == "in":
            return _eq(lo, hi) and any(_eq(lo, v) for v in values)
        return len(values) == len(value) and all(_lt(v, lo) or _lt(hi, v) for v in values)
    decided = {
        "=": lambda: _eq(lo, value) and _eq(hi, value),
        "!=": lambda: _lt(value, lo) or _lt(hi, value),
        "<": lambda: _lt(hi, value),
        "<=": lambda: not _lt(value, hi),
        ">": lambda: _lt(value, lo),
        ">=": lambda: not _lt(lo, value),
    }.get(f.op)
    return decided is not None and decided()


def _lt(a: pa.Scalar, b: pa.Scalar) -> bool:
    return bool(pc.less(a, b).as_py())


def _eq(a: pa.Scalar, b: pa.Scalar) -> bool:
    return bool(pc.equal(a, b).as_py())


__all__ = ["WholeRowGroups", "count_rows", "whole_row_groups"]
