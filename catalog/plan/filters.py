"""Row filters: ``(column, op, value)`` tuples, bound to a schema, turned into Arrow expressions.

Three layers, kept apart (style doc section 3):

* wire form: tuples as users and JSON commands send them, ANDed together;
* :class:`BoundFilter`: the column checked against the schema, the operator normalised and the
  value cast to the column type (strings are parsed, as hudi-rs does);
* consumers: :func:`to_expression` (exact row filter, also used by pyarrow to skip Parquet row
  groups by their statistics), :func:`filter_table` for partition pruning and
  :func:`stats_may_match` for min/max pruning.

Null semantics follow Arrow (and the ``hudi`` package): a comparison with a null column value is
not true, so ``!=`` and ``not in`` drop rows whose value is null.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Iterable, Sequence, Tuple, Union

import pyarrow as pa
import pyarrow.compute as pc

from catalog.errors import ColumnNotFoundError, InvalidQueryError, shown
from catalog.format.parquet import rows_matching

FilterValue = Union[None, bool, int, float, str, bytes, Any]
FilterTuple = Tuple[str, str, FilterValue]
"""``(column, op, value)``; ``value`` is a list for ``in`` / ``not in`` and ignored for null tests."""

COMPARISONS = ("=", "!=", "<", "<=", ">", ">=")
SET_OPS = ("in", "not in")
NULL_OPS = ("is null", "is not null")
OPS = COMPARISONS + SET_OPS + NULL_OPS
_ALIASES = {"==": "=", "<>": "!=", "not_in": "not in", "is_null": "is null", "is_not_null": "is not null"}


@dataclass(frozen=True)
class BoundFilter:
    """A filter whose column exists and whose value has the column's type."""

    column: str
    op: str
    value: Any  # pa.Scalar for comparisons, pa.Array for set ops, None for null tests
    type: pa.DataType

    def expression(self) -> pc.Expression:
        col = pc.field(self.column)
        if self.op == "is null":
            return col.is_null()
        if self.op == "is not null":
            return col.is_valid()
        if self.op == "in":
            return col.isin(self.value)
        if self.op == "not in":
            # Arrow's is_in says "false" for a null input; keep "not in" false on nulls too.
            return col.is_valid() & ~col.isin(self.value)
        return {
            "=": col == self.value,
            "!=": col != self.value,
            "<": col < self.value,
            "<=": col <= self.value,
            ">": col > self.value,
            ">=": col >= self.value,
        }[self.op]


def normalize_op(op: Any) -> str:
    if not isinstance(op, str):
        raise InvalidQueryError(f"filter operator must be a string, got {op!r}")
    norm = " ".join(op.strip().lower().split())
    norm = _ALIASES.get(norm, norm)
    if norm not in OPS:
        raise InvalidQueryError(f"unsupported filter operator {op!r}; expected one of {', '.join(OPS)}")
    return norm


def _orderable(dtype: pa.DataType) -> bool:
    return not (
        pa.types.is_nested(dtype) or pa.types.is_dictionary(dtype) or pa.types.is_null(dtype)
    )


def cast_value(value: Any, dtype: pa.DataType, column: str) -> pa.Scalar:
    """``value`` as a scalar of ``dtype``; strings are parsed. Raise InvalidQueryError otherwise,
    naming the column, its type and what a value of it looks like (not pyarrow's conversion error)."""
    if value is None:
        raise InvalidQueryError(f"filter on {column!r}: value is None; use 'is null' / 'is not null'")
    if isinstance(value, pa.Scalar):
        value = value.as_py()
    if isinstance(value, bool) and not pa.types.is_boolean(dtype):
        raise _wrong_type(value, dtype, column)
    if isinstance(value, float):
        if pa.types.is_integer(dtype) and not value.is_integer():
            raise _wrong_type(value, dtype, column)
        if pa.types.is_decimal(dtype):
            value = Decimal(repr(value))
    try:
        return pa.scalar(value, type=dtype)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        pass
    if isinstance(value, str):
        try:
            return _parse_string(value, dtype)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, ValueError):
            pass
    raise _wrong_type(value, dtype, column)


def _wrong_type(value: Any, dtype: pa.DataType, column: str) -> InvalidQueryError:
    """``filter: column 'amount' is int64; 'abc' is not a 64-bit integer`` (the value clipped)."""
    written = shown(repr(value), 60)
    return InvalidQueryError(f"filter: column {column!r} is {dtype}; {written} is not {_expected(dtype)}")


def _expected(dtype: pa.DataType) -> str:
    """What a filter value of ``dtype`` is, in words."""
    if pa.types.is_integer(dtype):
        bits, signed = dtype.bit_width, pa.types.is_signed_integer(dtype)
        if bits == 64:
            return "a 64-bit integer" if signed else "a non-negative 64-bit integer"
        low, high = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
        return f"an integer from {low} to {high}"
    if pa.types.is_floating(dtype):
        return "a number"
    if pa.types.is_decimal(dtype):
        return f"a number of at most {dtype.precision} digits, {dtype.scale} after the point"
    if pa.types.is_boolean(dtype):
        return "true or false"
    if pa.types.is_date(dtype):
        return "a date such as '2024-01-31'"
    if pa.types.is_timestamp(dtype):
        return "a timestamp such as '2024-01-31 12:00:00'"
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return "a text (write it in quotes)"
    return f"a {dtype} value"


def _parse_string(text: str, dtype: pa.DataType) -> pa.Scalar:
    if pa.types.is_timestamp(dtype) and dtype.tz is not None:
        try:
            return pc.cast(pa.scalar(text), dtype)
        except pa.ArrowInvalid:  # no offset in the text: read it as UTC, like the stored values
            return pc.cast(pc.cast(pa.scalar(text), pa.timestamp(dtype.unit)), dtype)
    return pc.cast(pa.scalar(text), dtype)


def bind_filter(raw: Any, schema: pa.Schema) -> BoundFilter:
    """Check one wire-form filter against ``schema``."""
    if isinstance(raw, BoundFilter):
        raw = (raw.column, raw.op, raw.value)
    if not isinstance(raw, (tuple, list)) or len(raw) not in (2, 3):
        raise InvalidQueryError(f"a filter must be a (column, op, value) tuple, got {raw!r}")
    column, op = raw[0], normalize_op(raw[1])
    value = raw[2] if len(raw) == 3 else None
    if not isinstance(column, str) or schema.get_field_index(column) < 0:
        raise ColumnNotFoundError(f"filter column {column!r} is not in the table schema")
    dtype = schema.field(column).type
    if op in NULL_OPS:
        return BoundFilter(column, op, None, dtype)
    if len(raw) != 3:
        raise InvalidQueryError(f"filter {raw!r} needs a value for operator {op!r}")
    if not _orderable(dtype):
        raise InvalidQueryError(f"filter on {column!r}: operator {op!r} is not supported for type {dtype}")
    if op in SET_OPS:
        if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
            raise InvalidQueryError(f"filter on {column!r}: {op!r} needs a list of values, got {value!r}")
        items = [cast_value(v, dtype, column) for v in value]
        if not items:
            raise InvalidQueryError(f"filter on {column!r}: {op!r} needs at least one value")
        return BoundFilter(column, op, pa.array([s.as_py() for s in items], type=dtype), dtype)
    if isinstance(value, (list, tuple, set)):
        raise InvalidQueryError(f"filter on {column!r}: {op!r} takes a single value, got {value!r}")
    return BoundFilter(column, op, cast_value(value, dtype, column), dtype)


def bind_filters(filters: Sequence[Any] | None, schema: pa.Schema) -> list[BoundFilter]:
    """Validate and bind all filters; a bad column, operator or value fails before any IO."""
    if filters is None:
        return []
    if isinstance(filters, tuple) and len(filters) in (2, 3) and isinstance(filters[0], str):
        filters = [filters]  # a single tuple
    if not isinstance(filters, (list, tuple)):
        raise InvalidQueryError(f"filters must be a list of (column, op, value) tuples, got {filters!r}")
    return [bind_filter(f, schema) for f in filters]


def to_expression(filters: Sequence[BoundFilter]) -> pc.Expression | None:
    """AND of all filters as one Arrow expression (``None`` when there are none)."""
    expr: pc.Expression | None = None
    for f in filters:
        expr = f.expression() if expr is None else expr & f.expression()
    return expr


def filter_table(table: pa.Table, filters: Sequence[BoundFilter]) -> pa.Table:
    """Rows of ``table`` that satisfy every filter on one of its columns (others are ignored)."""
    usable = [f for f in filters if f.column in table.column_names]
    expr = to_expression(usable)
    return table if expr is None else rows_matching(table, expr)  # on this thread: a small table


def stats_may_match(
    filters: Sequence[BoundFilter],
    column: str,
    min_value: Any,
    max_value: Any,
    null_count: int | None = None,
    value_count: int | None = None,
) -> bool:
    """Can a file (or row group) whose ``column`` spans [min, max] hold matching rows?

    Unknown statistics (``None``) never prune: prune only on proof.
    """
    for f in filters:
        if f.column != column:
            continue
        all_null = value_count is not None and null_count is not None and null_count >= value_count
        if f.op == "is null":
            if null_count == 0:
                return False
            continue
        if f.op == "is not null":
            if all_null:
                return False
            continue
        if all_null:
            return False  # every comparison with null is not true
        if min_value is None or max_value is None:
            continue
        lo, hi = pa.scalar(min_value, f.type), pa.scalar(max_value, f.type)
        if not _range_may_match(f, lo, hi):
            return False
    return True


def _lt(a: pa.Scalar, b: pa.Scalar) -> bool:
    return bool(pc.less(a, b).as_py())


def _range_may_match(f: BoundFilter, lo: pa.Scalar, hi: pa.Scalar) -> bool:
    v = f.value
    if f.op == "=":
        return not (_lt(v, lo) or _lt(hi, v))
    if f.op == "!=":
        return not (pc.equal(lo, hi).as_py() and pc.equal(lo, v).as_py())
    if f.op == "<":
        return _lt(lo, v)
    if f.op == "<=":
        return not _lt(v, lo)
    if f.op == ">":
        return _lt(v, hi)
    if f.op == ">=":
        return not _lt(hi, v)
    if f.op == "in":
        return any(not (_lt(x, lo) or _lt(hi, x)) for x in v)
    if f.op == "not in":
        return not (pc.equal(lo, hi).as_py() and pc.is_in(lo, value_set=v).as_py())
    return True


__all__ = [
    "OPS",
    "BoundFilter",
    "FilterTuple",
    "bind_filter",
    "bind_filters",
    "filter_table",
    "normalize_op",
    "stats_may_match",
    "to_expression",
]
