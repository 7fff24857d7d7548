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
"""

from __future__ import annotations

from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from catalog.plan.dataset import only_decoded
from catalog.plan.filters import BoundFilter, bind_filters
from catalog.plan.options import ReadOptions
from catalog.plan.splits import FooterCache, default_footer_cache
from catalog.read.context import ReadContext
from catalog.table.files import Split


def count_rows(
    context: ReadContext, splits: Sequence[Split], options: ReadOptions, footers: FooterCache | None = None
) -> int | None:
    """The rows a read of ``splits`` with ``options`` returns, from footers only (see the module
    docstring); ``None``: they must be read. ``footers``: the footer cache planning used (else
    the process-wide one; a split's estimated rows are no count: the planner reads no footer of
    a file it does not cut)."""
    if options.incremental or options.cdc or context.cdc is not None:
        return None
    footers = footers if footers is not None else default_footer_cache()
    if options.filters:
        filters = bind_filters(list(options.filters), context.table_schema)
        rows = count_by_stats(context, splits, filters, footers)
    else:
        rows = _footer_rows(context, splits, footers)
    return rows if rows is None or options.limit is None else min(rows, options.limit)


def _footer_rows(context: ReadContext, splits: Sequence[Split], footers: FooterCache) -> int | None:
    """The footer row counts of the row groups ``splits`` own, when every one is a Parquet base
    file without logs."""
    for split in splits:
        base = split.file_slice.base_file
        if base is None or base.extension != "parquet" or split.file_slice.log_files:
            return None
    total = 0
    for split in splits:
        file_slice = split.file_slice
        assert file_slice.base_file is not None and file_slice.base_file_path is not None
        rows = footers.parquet(context.storage, file_slice.base_file_path, file_slice.base_file.size).layout.rows
        total += sum(rows) if split.row_groups is None else sum(rows[g] for g in split.row_groups)
    return total


def count_by_stats(
    context: ReadContext, splits: Sequence[Split], filters: Sequence[BoundFilter], footers: FooterCache
) -> int | None:
    """The rows of ``splits`` matching all ``filters``, when the statistics decide every row
    group (see the module docstring); ``None``: count by reading."""
    if not all(_comparable(f.type) for f in filters):
        return None
    total = 0
    for split in splits:
        file_slice = split.file_slice
        base, path = file_slice.base_file, file_slice.base_file_path
        if base is None or path is None or file_slice.log_files or not only_decoded(context, split):
            return None
        footer = footers.footer(context.storage, path, base.size)
        columns = _columns(footer, filters)
        if columns is None:
            return None
        groups = split.row_groups if split.row_groups is not None else range(footer.num_row_groups)
        for index in groups:
            group = footer.row_group(index)
            for f in filters:
                if not _all_match(f, group.column(columns[f.column]).statistics, group.num_rows):
                    return None
            total += group.num_rows
    return total


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


__all__ = ["count_by_stats", "count_rows"]
