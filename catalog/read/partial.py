"""Partial updates in a merge-on-read merge (``hoodie.table.partial.update.mode=IGNORE_DEFAULTS``).

Hudi 1.1+ merges two versions of a record as its merge mode says (the later write, or the greater
ordering value with ties to the later write) and then, unless either version is a delete, fills
each column of the winning version that holds its default with the losing version's value. The
winner keeps its ordering value. Spark-written schemas give every column the default ``null``, so
a null column takes the other version's value.

The versions of a key are folded one at a time in the order they were written (log order, then
the base file beneath them): a merged version is what the next one merges with. The fold is not
a sort (a column filled from an older, lower-ordered version can stay when a middle-ordered
version arrives later), so it runs in rounds: round ``r`` merges the ``r``-th version of every key
with everything folded before it, all keys at once.
"""

from __future__ import annotations

import functools
from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc

from catalog.errors import UnsupportedTableError
from catalog.format.avro import parse_avro_schema
from catalog.format.log_file import LogBlock

#: ``step(older, newer)``: the merged versions of row-aligned tables (the same keys row by row)
MergeStep = Callable[[pa.Table, pa.Table], pa.Table]


def check_defaults(block: LogBlock) -> None:
    """Refuse a data block whose writer schema gives a column a default other than null: Hudi
    compares values with such a default by Java object identity, which we cannot restate."""
    text = block.header.get("SCHEMA")
    if text:
        columns = _non_null_defaults(text)
        if columns:
            raise UnsupportedTableError(
                f"partial update mode IGNORE_DEFAULTS with non-null column defaults ({', '.join(columns)}) "
                "is not supported for MOR reads"
            )


@functools.lru_cache(maxsize=64)
def _non_null_defaults(text: str) -> tuple[str, ...]:
    fields = parse_avro_schema(text).get("fields") or []
    return tuple(f["name"] for f in fields if f.get("default") is not None)


def fill_defaults(high: pa.Table, low: pa.Table, columns: list[str], where: pa.Array) -> pa.Table:
    """``high`` whose null ``columns`` take ``low``'s value in the rows ``where`` is true
    (row-aligned tables of one schema)."""
    for name in columns:
        idx = high.schema.get_field_index(name)
        h = high.column(idx).combine_chunks()
        filled = pc.if_else(pc.and_(where, pc.is_null(h)), low.column(name).combine_chunks(), h)
        high = high.set_column(idx, high.schema.field(idx), filled)
    return high


def choose(pick_newer: pa.Array, older: pa.Table, newer: pa.Table) -> pa.Table:
    """Row by row, ``newer``'s row where ``pick_newer`` is true, else ``older``'s."""
    columns = [
        pc.if_else(pick_newer, newer.column(i).combine_chunks(), older.column(i).combine_chunks())
        for i in range(newer.num_columns)
    ]
    return pa.Table.from_arrays(columns, schema=newer.schema)


def fold_in_order(rows: pa.Table, key: str, seq: str, step: MergeStep) -> pa.Table:
    """One row per ``key``: its rows merged by ``step`` in ``seq`` order (oldest first)."""
    rows = rows.take(pc.sort_indices(rows, sort_keys=[(key, "ascending"), (seq, "ascending")]))
    keys = rows.column(key).combine_chunks()
    n = len(keys)
    if n <= 1:
        return rows
    starts = pa.concat_arrays([pa.array([True]), pc.not_equal(keys.slice(0, n - 1), keys.slice(1))])
    group = pc.subtract(pc.cumulative_sum(starts.cast(pa.int64())), 1)
    first = pc.indices_nonzero(starts).cast(pa.int64())
    rank = pc.subtract(_positions(n), first.take(group))
    folded = rows.filter(starts)
    groups = _positions(len(first))
    for r in range(1, pc.max(rank).as_py() + 1):
        at = pc.equal(rank, r)
        these = group.filter(at)
        merged = step(folded.take(these), rows.filter(at))
        slot = pc.index_in(groups, value_set=these)
        pick = pc.if_else(pc.is_valid(slot), pc.add(slot, folded.num_rows), groups)
        folded = pa.concat_tables([folded, merged]).take(pick)
    return folded


def _positions(n: int) -> pa.Array:
    """``0, 1, ..., n - 1`` as int64."""
    return pc.indices_nonzero(pc.is_null(pa.nulls(n, pa.bool_()))).cast(pa.int64())


__all__ = ["MergeStep", "check_defaults", "choose", "fill_defaults", "fold_in_order"]
