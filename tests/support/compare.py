"""Row comparison, the one helper every test uses, and reads of the ``hudi`` package (hudi-rs) to compare with."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from hudi import HudiReadOptions, HudiTableBuilder

QUERY_TYPE = "hoodie.read.query.type"
AS_OF = "hoodie.read.as.of.timestamp"
START = "hoodie.read.start.timestamp"
END = "hoodie.read.end.timestamp"
READ_OPTIMIZED = "hoodie.read.use.read_optimized.mode"


def hudi_read(
    path: str,
    *,
    columns: list[str] | None = None,
    filters: list[tuple[str, str, Any]] | None = None,
    read_optimized: bool = False,
    as_of: str | None = None,
    start: str | None = None,
    end: str | None = None,
) -> pa.Table | None:
    """The ``hudi`` package's answer; ``None`` when it returns no batches (no schema to compare)."""
    options: dict[str, str] = {}
    if read_optimized:
        options[READ_OPTIMIZED] = "true"
    if as_of is not None:
        options[AS_OF] = as_of
    if start is not None or end is not None:
        options[QUERY_TYPE] = "incremental"
        if start is not None:
            options[START] = start
        if end is not None:
            options[END] = end
    hudi_filters = [(c, op, _hudi_value(v)) for c, op, v in filters] if filters else None
    table = HudiTableBuilder.from_base_uri(path).build()
    batches = table.read(HudiReadOptions(filters=hudi_filters, projection=columns, hudi_options=options))
    batches = [b for b in batches if b.num_rows]
    return pa.Table.from_batches(batches) if batches else None


def _hudi_value(value: Any) -> str:
    """hudi-rs takes every filter value as a string; set operators take a comma-joined list."""
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def _sortable(dtype: pa.DataType) -> bool:
    return not pa.types.is_nested(dtype) and not pa.types.is_binary(dtype)


def normalise(ours: pa.Table, theirs: pa.Table) -> tuple[pa.Table, pa.Table]:
    """Cast ``theirs`` to our column types and sort both by every sortable column.

    Type normalisation is only needed where hudi-rs departs from Spark/Hudi on purpose: it marks
    meta columns non-nullable (ours are nullable: tables without meta fields hold nulls there).
    Any other type difference fails the cast and the test.
    """
    assert theirs.column_names == ours.column_names, (theirs.column_names, ours.column_names)
    cast_cols = []
    for name in ours.column_names:
        col = theirs.column(name)
        target = ours.schema.field(name).type
        cast_cols.append(col if col.type.equals(target) else col.cast(target))
    theirs = pa.table(cast_cols, schema=ours.schema)
    keys = [(n, "ascending", "at_start") for n in ours.column_names if _sortable(ours.schema.field(n).type)]
    if keys:
        ours = ours.take(pc.sort_indices(ours, sort_keys=keys))
        theirs = theirs.take(pc.sort_indices(theirs, sort_keys=keys))
    return ours, theirs


def assert_same_rows(ours: pa.Table, theirs: pa.Table | None, what: str = "", exact_types: bool = True) -> None:
    """Equal row sets (any order), compared column by column on Python values.

    ``theirs`` is ``None`` when the reference returned nothing. Column names and types must
    match; ``exact_types=False`` (for a reference that departs from Hudi's types, named where it
    is used) casts ``theirs`` to ours instead (see ``normalise``).
    """
    if theirs is None:
        assert ours.num_rows == 0, f"{what}: the reference returned no rows, we returned {ours.num_rows}"
        return
    if exact_types:
        differ = [(f.name, str(f.type), str(g.type)) for f, g in zip(ours.schema, theirs.schema) if f.type != g.type]
        assert not differ, f"{what}: column types differ (name, ours, theirs): {differ}"
    assert ours.num_rows == theirs.num_rows, f"{what}: {ours.num_rows} rows vs {theirs.num_rows} expected"
    ours, theirs = normalise(ours, theirs)
    for name in ours.column_names:
        a, b = ours.column(name).to_pylist(), theirs.column(name).to_pylist()
        assert a == b, f"{what}: column {name!r} differs:\n ours={a}\nhudi={b}"


def rows(table: pa.Table) -> list[str]:
    """Rows as sorted strings: a row set to compare regardless of order (test tables are small)."""
    return sorted(repr(r) for r in zip(*(c.to_pylist() for c in table.columns)))


def _cdc_image(text: str | None, exact: bool) -> Any:
    if text is None or exact or text == "null":
        return text
    return json.dumps({k: v for k, v in json.loads(text).items() if v is not None}, sort_keys=True)


def cdc_rows(table: pa.Table, exact: bool = True) -> Counter:
    """CDC rows (``op``, ``ts_ms``, ``before``, ``after``) as a multiset (row order is not part of
    the result); ``exact=False`` compares the JSON images as objects without their null fields."""
    return Counter(
        (r["op"], r["ts_ms"], _cdc_image(r["before"], exact), _cdc_image(r["after"], exact)) for r in table.to_pylist()
    )
