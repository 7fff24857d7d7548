"""``count``, ``min`` and ``max`` of a planned read, answered from Parquet footers alone where that
answer is exact, or refused with the reason.

The rows the read returns must be exactly whole row groups of Parquet base files as stored
(:func:`catalog.plan.count.whole_row_groups`: no log to merge, no increment, filters decided by
the statistics of every planned row group). Then ``count(*)`` is the sum of their row counts, and
for a column each row group's statistics answer ``count(col)`` (rows minus nulls) and its
``min``/``max`` (the smallest minimum, the largest maximum), provided, in every file:

- the file stores the column as the read returns it: no rename or retype by schema evolution, no
  partition value filled in from the path (:func:`.dataset.only_decoded`), the same Arrow type;
- the statistics hold a null count (and, for ``min``/``max``, a minimum and a maximum);
- for ``min``/``max``, the type is one whose statistics are exact values of the column: integers,
  booleans, dates, timestamps, decimals, and strings from writers that never truncate footer
  statistics (parquet-mr / parquet-java, Arrow's C++ writer: both leave out a statistic rather than
  shorten it). Floating point is refused: NaN is left out of Parquet's minimum and maximum, while
  Spark and SQL order it above every number.

A column is a top-level name or a dotted path into structs (as ``columns`` names it,
:mod:`.projection`), down to a primitive leaf. Nothing is estimated: any file that does not prove
its part refuses the whole answer (:class:`~catalog.errors.UnansweredError`, naming why).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from catalog.errors import ColumnNotFoundError, InvalidQueryError, UnansweredError, shown
from catalog.plan.count import WholeRowGroups, whole_row_groups
from catalog.plan.dataset import only_decoded
from catalog.plan.options import ReadOptions
from catalog.plan.projection import resolve_path
from catalog.plan.splits import FooterCache
from catalog.read.context import ReadContext
from catalog.table.files import Split

FUNCTIONS = ("count", "min", "max")
#: the column of ``count(*)``
STAR = "*"
#: what the message of a refusal starts with (the wire contract: docs/flight.md "Aggregates")
UNANSWERED = "aggregates not answered from metadata: "
#: Parquet writers whose footer statistics are never truncated (a too long value is left out)
_UNTRUNCATED_WRITERS = ("parquet-mr", "parquet-java", "parquet-cpp-arrow", "parquet-cpp")


@dataclass(frozen=True)
class Aggregate:
    """One aggregate: ``function`` of ``column`` (``"*"``: every row, with ``count`` only)."""

    function: str
    column: str

    @property
    def name(self) -> str:
        """The result column's name: ``count(*)``, ``min(fare)``."""
        return f"{self.function}({self.column})"

    @classmethod
    def parse(cls, raw: Any) -> "Aggregate":
        """An aggregate of its wire form ``[function, column]``.

        Raises:
            InvalidQueryError: not a pair, an unknown function, or ``"*"`` with ``min``/``max``.
        """
        if not isinstance(raw, (list, tuple)) or len(raw) != 2 or not all(isinstance(p, str) for p in raw):
            raise InvalidQueryError(f"an aggregate is [function, column], got {shown(repr(raw))}")
        function, column = raw[0].lower(), raw[1]
        if function not in FUNCTIONS:
            raise InvalidQueryError(f"unknown aggregate function {shown(raw[0])!r}; there are {', '.join(FUNCTIONS)}")
        if not column or (column == STAR and function != "count"):
            raise InvalidQueryError(f"{function} needs a column ('*' is for count only)")
        return cls(function, column)


def check_aggregates(aggregates: Sequence[Aggregate], options: ReadOptions) -> None:
    """Refuse the options an aggregate query does not take, naming each.

    Raises:
        InvalidQueryError: ``limit``, ``columns``, or an incremental or CDC query with aggregates.
    """
    if not aggregates:
        raise InvalidQueryError("aggregates needs at least one [function, column]")
    if options.limit is not None:
        raise InvalidQueryError("aggregates do not take a limit (they answer one row)")
    if options.columns is not None:
        raise InvalidQueryError("aggregates do not take columns (each aggregate names its column)")
    if options.incremental or options.cdc:
        raise InvalidQueryError(f"aggregates do not take a {options.query_type} query (snapshot or read_optimized)")


def aggregate_schema(aggregates: Sequence[Aggregate], schema: pa.Schema) -> pa.Schema:
    """The answer's schema: one field per aggregate, counts ``int64`` not null, ``min``/``max``
    the column's type (nullable: null when the column holds no value).

    Raises:
        ColumnNotFoundError: an aggregate names no column of ``schema``.
    """
    fields = []
    for aggregate in aggregates:
        if aggregate.column == STAR:
            fields.append(pa.field(aggregate.name, pa.int64(), nullable=False))
            continue
        field = _field(schema, aggregate.column)
        if aggregate.function == "count":
            fields.append(pa.field(aggregate.name, pa.int64(), nullable=False))
        else:
            fields.append(pa.field(aggregate.name, field.type, nullable=True))
    return pa.schema(fields)


def metadata_aggregates(
    context: ReadContext,
    splits: Sequence[Split],
    options: ReadOptions,
    aggregates: Sequence[Aggregate],
    footers: FooterCache | None = None,
) -> pa.RecordBatch:
    """The one row of ``aggregates`` over the read of ``splits`` with ``options``, from footers.

    Raises:
        UnansweredError: the footers do not decide it exactly (the message says why).
        ColumnNotFoundError: an aggregate names no column.
    """
    schema = aggregate_schema(aggregates, context.table_schema)
    whole = whole_row_groups(context, splits, options, footers)
    if isinstance(whole, str):
        raise UnansweredError(UNANSWERED + whole)
    values = [_answer(context, whole, aggregate) for aggregate in aggregates]
    return pa.record_batch([pa.array([v], f.type) for v, f in zip(values, schema)], schema=schema)


def _answer(context: ReadContext, whole: Sequence[WholeRowGroups], aggregate: Aggregate) -> Any:
    if aggregate.column == STAR:
        return sum(w.rows for w in whole)
    path = resolve_path(context.table_schema, aggregate.column)
    assert path is not None  # checked by aggregate_schema
    dtype = _field(context.table_schema, aggregate.column).type
    if aggregate.function != "count":
        _check_exact_min_max(aggregate, dtype)
    total, found = 0, []
    for part in whole:
        chunk = _stored_column(context, part, path, dtype, aggregate)
        for group in part.groups:
            stats = part.footer.row_group(group).column(chunk).statistics
            rows = part.footer.row_group(group).num_rows
            if stats is None or not stats.has_null_count:
                raise UnansweredError(UNANSWERED + f"a row group has no null count for {aggregate.column!r}")
            if aggregate.function == "count":
                total += rows - stats.null_count
            elif stats.null_count < rows:  # a value to bound
                if not stats.has_min_max:
                    raise UnansweredError(UNANSWERED + f"a row group has no minimum or maximum of {aggregate.column!r}")
                found.append(stats.min if aggregate.function == "min" else stats.max)
    if aggregate.function == "count":
        return total
    if not found:
        return None
    try:
        values = pa.array(found, dtype)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
        raise UnansweredError(UNANSWERED + f"statistics of {aggregate.column!r} are not values of {dtype}") from None
    return (pc.min if aggregate.function == "min" else pc.max)(values).as_py()


def _check_exact_min_max(aggregate: Aggregate, dtype: pa.DataType) -> None:
    exact = (pa.types.is_integer(dtype) or pa.types.is_boolean(dtype) or pa.types.is_date(dtype)
             or pa.types.is_timestamp(dtype) or pa.types.is_decimal(dtype) or pa.types.is_string(dtype)
             or pa.types.is_large_string(dtype))
    if pa.types.is_floating(dtype):
        raise UnansweredError(
            UNANSWERED + f"{aggregate.name}: {aggregate.column!r} is floating point (NaN is left out of Parquet "
            "statistics but orders above every number)"
        )
    if not exact:
        raise UnansweredError(UNANSWERED + f"{aggregate.name}: statistics of a {dtype} column are not compared here")


def _stored_column(
    context: ReadContext, part: WholeRowGroups, path: list[str], dtype: pa.DataType, aggregate: Aggregate
) -> int:
    """The index of the column chunk holding ``path`` in ``part``'s file, once the file is shown
    to store it as the read returns it."""
    if not only_decoded(context, part.split):
        raise UnansweredError(
            UNANSWERED + f"a base file's {aggregate.column!r} is changed when read (schema evolution, partition "
            "values, bootstrap)"
        )
    footer = part.footer
    stored = footer.schema.to_arrow_schema()
    field = stored.field(path[0]) if stored.get_field_index(path[0]) >= 0 else None
    for name in path[1:]:
        if field is None or not pa.types.is_struct(field.type) or field.type.get_field_index(name) < 0:
            field = None
            break
        field = field.type.field(name)
    if field is None or not field.type.equals(dtype):
        raise UnansweredError(UNANSWERED + f"a base file does not store {aggregate.column!r} as {dtype}")
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        writer = (footer.created_by or "").lower()
        if aggregate.function != "count" and not writer.startswith(_UNTRUNCATED_WRITERS):
            raise UnansweredError(
                UNANSWERED + f"{aggregate.name}: string statistics of the writer {shown(footer.created_by or '?')!r} "
                "may be truncated"
            )
    dotted = ".".join(path)
    for index in range(footer.num_columns):
        if footer.schema.column(index).path == dotted:
            return index
    raise UnansweredError(UNANSWERED + f"a base file has no column chunk of {aggregate.column!r}")


def _field(schema: pa.Schema, column: str) -> pa.Field:
    path = resolve_path(schema, column)
    if path is None:
        raise ColumnNotFoundError(f"aggregate column {shown(column)!r} is not in the table schema")
    field = schema.field(path[0])
    for name in path[1:]:
        field = field.type.field(name)
    if pa.types.is_nested(field.type):
        raise UnansweredError(UNANSWERED + f"{column!r} is a {field.type}: statistics are kept of leaf columns")
    return field


__all__ = [
    "FUNCTIONS",
    "STAR",
    "UNANSWERED",
    "Aggregate",
    "aggregate_schema",
    "check_aggregates",
    "metadata_aggregates",
]
