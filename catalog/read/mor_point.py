"""The merge-on-read merge of a point read's few rows, decided in Python.

A warm point query merges a handful of rows: its key's base row and the few log records of that
key. The vectorised merge (:mod:`catalog.read.mor`) spends dozens of Arrow kernel calls on such
one-row arrays, each costing more than the comparison it makes; here the winners are decided
over Python values of the key, ordering and delete-flag columns only, and the merged rows are
gathered with one ``take`` per log block. The rules are those of :mod:`catalog.read.mor`
(format doc 7.2-7.3), restated per row:

* a key's log winner: under COMMIT_TIME ordering the last write; under EVENT_TIME the greatest
  ordering value (fields compared in order, null below any value), ties to the later write,
  except that versions older than the key's last commit-time delete are gone and a surviving
  commit-time delete ranks below every later write;
* a base row whose key has a winner is replaced by it (dropped, if the winner is a delete),
  unless, under EVENT_TIME, the winner is not a commit-time delete and the base row's ordering
  value is strictly greater (compared field by field; a null on either side stops the
  comparison: not greater);
* winners no base row matched are inserts, in key order (deletes among them vanish);
* a log record is a delete when ``_hoodie_is_deleted`` is true, its operation is ``D`` or its
  delete-marker column (the table's ``delete_marker``) reads as the marker.

Partial updates (``IGNORE_DEFAULTS``) fold columns of several versions: such tables never come
here (:mod:`catalog.read.mor_slice`).

Inputs it does not carry (a block without a key column, ordering values that are not plain
numbers, strings, bytes or times, a NaN ordering value) return ``None`` from
:meth:`PointWinners.of`: the caller merges them with the vectorised merge.
"""

from __future__ import annotations

import math
from typing import Iterable, Iterator, NamedTuple, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from catalog.format.log_block import DeleteRecords
from catalog.format.parquet import cast_array
from catalog.read.mor import (
    LogPart,
    MergeSpec,
    commit_time_deletes,
    delete_flags,
    delete_ordering,
    fill_constants,
    key_in,
)

#: a point read with at most this many log rows (and keys) is merged here
FEW_ROWS = 64
#: ordering values are compared as Python values of these types (times by their integer value)
_INTEGER_VIEW = {8: pa.int64(), 4: pa.int32()}


class _Version(NamedTuple):
    """One log row of a key: where it sits and what the merge compares."""

    seq: int  # apply order across the slice's log rows
    delete: bool
    commit_time_delete: bool
    ordering: tuple  # the ordering values, one per field (None: null)
    part: int  # index of its data part (-1: a delete block's key, no payload)
    row: int


def _python_values(arr: pa.Array | pa.ChunkedArray) -> list | None:
    """``arr`` as Python values that compare as Arrow compares them (``None``: not carried)."""
    kind = arr.type
    if pa.types.is_temporal(kind):
        width = kind.bit_width // 8
        if width not in _INTEGER_VIEW:
            return None
        arr = arr.cast(_INTEGER_VIEW[width])  # times compare as their stored integers
    elif not (
        pa.types.is_integer(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_decimal(kind)
        or pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
    ):
        return None
    values = arr.to_pylist()
    if pa.types.is_floating(kind) and any(v is not None and math.isnan(v) for v in values):
        return None  # Arrow sorts NaN above every number: not restated here
    return values


def _ranked(ordering: tuple) -> tuple:
    """A sort key of ordering values, nulls first (as the vectorised merge sorts them)."""
    return tuple((0,) if v is None else (1, v) for v in ordering)


def _greater(base: tuple, winner: tuple) -> bool:
    """``base`` ordering values strictly greater than the ``winner``'s, field by field."""
    for b, w in zip(base, winner):
        if b is None or w is None:
            return False
        if b != w:
            return bool(b > w)
    return False


class PointWinners:
    """The log winners of a point read's few keys, ready to merge with the base rows."""

    def __init__(self, spec: MergeSpec, records: list[pa.Table], winners: dict[str, _Version]):
        self.spec = spec
        self.records = records  # the data parts, as logged
        self.winners = winners

    @classmethod
    def of(cls, spec: MergeSpec, parts: Sequence[LogPart]) -> "PointWinners | None":
        """The winners of ``parts`` (oldest first), or ``None`` when they hold what is not carried."""
        versions: dict[str | None, list[_Version]] = {}
        records: list[pa.Table] = []
        seq = 0
        nulls = (None,) * len(spec.ordering)
        for part in parts:
            if isinstance(part, DeleteRecords):
                default = commit_time_deletes(part)
                first = delete_ordering(spec, part, default)
                firsts = _python_values(first) if first is not None else [None] * len(part)
                if firsts is None:
                    return None
                for row, (key, ctdel, value) in enumerate(zip(part.record_keys.to_pylist(), default, firsts)):
                    ordering = (value, *nulls[1:]) if spec.ordering else ()
                    versions.setdefault(key, []).append(_Version(seq + row, True, ctdel, ordering, -1, row))
                seq += len(part)
                continue
            if any(part.schema.get_field_index(name) < 0 for name in spec.key_fields):
                return None  # keys of such a block are nulls or null markers: left to the general merge
            columns = []
            for name in spec.ordering:
                if part.schema.get_field_index(name) < 0:
                    columns.append([None] * part.num_rows)
                    continue
                values = _python_values(cast_array(part.column(name), spec.schema.field(name).type))
                if values is None:
                    return None
                columns.append(values)
            deletes = delete_flags(spec, part).to_pylist()
            index = len(records)
            records.append(part)
            for row, key in enumerate(spec.keys(part).to_pylist()):
                ordering = tuple(column[row] for column in columns)
                versions.setdefault(key, []).append(_Version(seq + row, deletes[row], False, ordering, index, row))
            seq += part.num_rows
        # rows without a key are dropped
        return cls(spec, records, {key: _winner(spec, found) for key, found in versions.items() if key is not None})

    def merge(
        self,
        base: Iterable[pa.RecordBatch],
        *,
        emit_inserts: bool = True,
        other_base_keys: pa.Array | None = None,
        constants: dict[str, pa.Scalar] | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """Stream ``base`` batches (merge schema) against the winners; ``other_base_keys``: keys of
        base rows outside ``base`` (other splits), which are not inserts; ``constants``: partition
        values of tables that drop partition columns from data files, set on log rows."""
        spec, winners = self.spec, self.winners
        matched: set[str] = set()
        for batch in base:
            hits = _matches(spec, batch, winners)
            if not hits:
                yield batch
                continue
            base_ordering = self._base_ordering(batch, hits)
            dropped, replaced = [], []
            for row, key in hits:
                matched.add(key)
                winner = winners[key]
                if (
                    spec.event_time
                    and not winner.commit_time_delete
                    and _greater(base_ordering[row], winner.ordering)
                ):
                    continue  # the base row keeps its place
                dropped.append(row)
                if not winner.delete:
                    replaced.append(winner)
            yield from _without(batch, dropped)
            yield from self._payload(replaced, constants)
        if not emit_inserts:
            return
        left = sorted(key for key in winners if key not in matched and not winners[key].delete)
        if left and other_base_keys is not None:
            found = pc.is_valid(pc.index_in(pa.array(left, pa.string()), value_set=other_base_keys)).to_pylist()
            left = [key for key, elsewhere in zip(left, found) if not elsewhere]
        yield from self._payload([winners[key] for key in left], constants)

    def _base_ordering(self, batch: pa.RecordBatch, hits: list[tuple[int, str]]) -> dict[int, tuple]:
        """The ordering values of the matched base rows (compared under EVENT_TIME only)."""
        if not self.spec.event_time:
            return {}
        rows = [row for row, _ in hits]
        taken = batch if len(rows) == batch.num_rows else batch.take(pa.array(rows, pa.int64()))
        columns = [cast_array(taken.column(name), self.spec.schema.field(name).type) for name in self.spec.ordering]
        values = [_python_values(column) for column in columns]
        lists = [v if v is not None else column.to_pylist() for v, column in zip(values, columns)]
        return {row: tuple(column[i] for column in lists) for i, (row, _) in enumerate(hits)}

    def _payload(self, versions: list[_Version], constants: dict[str, pa.Scalar] | None) -> Iterator[pa.RecordBatch]:
        """The merge-schema rows of data ``versions``, in their order."""
        if not versions:
            return
        by_part: dict[int, list[int]] = {}
        for version in versions:
            by_part.setdefault(version.part, []).append(version.row)
        tables, offsets, start = [], {}, 0
        for part, rows in by_part.items():
            records = self.records[part]
            if rows != list(range(records.num_rows)):  # a point read's part is often its one row
                records = records.take(pa.array(rows, pa.int64()))
            tables.append(self.spec.conform(records))
            offsets.update({(part, row): start + i for i, row in enumerate(rows)})
            start += len(rows)
        rows_table = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
        order = [offsets[(v.part, v.row)] for v in versions]
        if order != list(range(len(order))):
            rows_table = rows_table.take(pa.array(order, pa.int64()))
        if constants:
            rows_table = fill_constants(rows_table, constants)
        yield from (b for b in rows_table.combine_chunks().to_batches() if b.num_rows)


def _without(batch: pa.RecordBatch, rows: list[int]) -> Iterator[pa.RecordBatch]:
    """``batch`` without ``rows`` (ascending), as slices: no per-row work on a large batch."""
    start = 0
    for row in [*rows, batch.num_rows]:
        if row > start:
            yield batch if start == 0 and row == batch.num_rows else batch.slice(start, row - start)
        start = row + 1


def _winner(spec: MergeSpec, versions: list[_Version]) -> _Version:
    """The version of one key that wins among its log ``versions`` (oldest first)."""
    if not spec.event_time:
        return versions[-1]
    cut = max((v.seq for v in versions if v.commit_time_delete), default=-1)
    alive = [v for v in versions if v.seq >= cut]
    return max(alive, key=lambda v: (not v.commit_time_delete, _ranked(v.ordering), v.seq))


def _matches(spec: MergeSpec, batch: pa.RecordBatch, winners: dict[str, _Version]) -> list[tuple[int, str]]:
    """(row, key) of the base rows of ``batch`` whose key has a winner."""
    keys = spec.keys(batch)
    if batch.num_rows <= FEW_ROWS:
        return [(row, key) for row, key in enumerate(keys.to_pylist()) if key in winners]
    found = pc.indices_nonzero(key_in(keys, tuple(winners))).to_pylist()
    return list(zip(found, keys.take(pa.array(found, pa.int64())).to_pylist()))


__all__ = ["FEW_ROWS", "PointWinners"]
