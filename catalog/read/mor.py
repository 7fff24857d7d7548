"""Vectorised merge-on-read merge of one file slice (format doc sections 7.1-7.3).

Algorithm (Java's file-group reader semantics, restated with Arrow compute):

1. The valid log blocks (:mod:`catalog.read.log_scan`) are decoded oldest first into Arrow tables
   conformed to the *merge schema* (the columns the query needs plus record key, ordering and
   delete-marker columns, cast by name to the table schema: missing columns are null, promoted
   types are cast). Each row gets an apply sequence number and delete flags; delete-block keys
   become rows with null payload.
2. The log rows are reduced to one winner per record key (:func:`reduce_winners`):
   COMMIT_TIME ordering keeps the last write; EVENT_TIME keeps the greatest ordering value, ties
   to the later write. A delete without an ordering value (Hudi's default ``0``) is a
   *commit-time delete*: it beats every older version of its key regardless of ordering, and
   any later write beats it.
3. Base batches stream through: a base row whose key has a log winner is replaced by it (or
   dropped, if the winner is a delete), except that under EVENT_TIME ordering a base row with a
   strictly greater ordering value than a non-commit-time winner keeps its place.
4. Log winners never matched by a base row are inserts (deletes among them vanish).

Tables with partial updates (``IGNORE_DEFAULTS``) fold a key's versions in write order instead of
picking one in steps 2 and 3: the winner's nulls take the loser's values (:mod:`catalog.read.partial`).

Memory bound: one base batch at a time (``BATCH_SIZE`` rows) plus the winner table, i.e. the
latest version of every key that appears in the slice's valid log blocks, restricted to the
merge-schema columns. Log blocks are decoded one at a time and folded into the winners whenever
the pending rows outgrow the winner table (the reduction is associative), so a slice whose logs
hold many versions of the same keys never holds them all at once. Block contents are fetched
only for blocks that survive the scan (rolled-back and future blocks are never read).
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator, Sequence, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from catalog.errors import UnsupportedTableError
from catalog.format.avro import OPERATION_COLUMN
from catalog.format.float_text import floats_as_text, widens_float_as_text
from catalog.format.log_block import DeleteRecords, decode_record_block
from catalog.format.log_cache import Decoded, KeyRows
from catalog.format.log_file import LogBlock
from catalog.format.parquet import cast_array, rows_matching
from catalog.format.row_groups import PointLookup
from catalog.read.context import ReadContext
from catalog.read.partial import check_defaults, choose, fill_defaults, fold_in_order
from catalog.storage import Storage
from catalog.table.config import TableConfig
from catalog.table.internal_schema import ColumnMap, rename_columns

RECORD_KEY = "_hoodie_record_key"
IS_DELETED = "_hoodie_is_deleted"
EVENT_TIME = "EVENT_TIME_ORDERING"
COMMIT_TIME = "COMMIT_TIME_ORDERING"
#: the partial update mode the merge carries (:mod:`catalog.read.partial`)
IGNORE_DEFAULTS = "IGNORE_DEFAULTS"

_KEY = "__hf_key"
_SEQ = "__hf_seq"
_DEL = "__hf_delete"
_CTDEL = "__hf_commit_time_delete"
_INTERNAL = (_KEY, _SEQ, _DEL, _CTDEL)
#: how Hudi spells a null or empty value in a record key built from fields (``KeyGenUtils``)
NULL_KEY, EMPTY_KEY = "__null__", "__empty__"
#: Fold pending log rows into the winners once there are this many (and more than winners).
_REDUCE_AT = 1 << 20
#: the merge specs kept (:meth:`MergeSpec.for_context`), by config id, schema id and read columns
#: (and the read schema, when it keeps structs in part)
_SPECS: dict[tuple[int, int, tuple[str, ...], pa.Schema | None], tuple[TableConfig, pa.Schema, "MergeSpec"]] = {}
_SPECS_KEPT = 64


class MergeSpec:
    """What the merge of one table needs to know: key, ordering, delete marker, merge mode and
    whether a version's null columns take the other version's values (``partial``)."""

    def __init__(self, key_fields: Sequence[str], ordering: Sequence[str], mode: str, schema: pa.Schema,
                 delete_marker: tuple[str, str] | None = None, partial: bool = False, floats_as_text: bool = False):
        self.key_fields = list(key_fields)
        self.floats_as_text = floats_as_text  # the table's release widens a float to double through its text
        self.delete_marker = delete_marker
        self.ordering = [f for f in ordering if schema.get_field_index(f) >= 0]
        if mode not in (EVENT_TIME, COMMIT_TIME):
            if mode == "CUSTOM":
                raise UnsupportedTableError("custom record merge mode / payload is not supported for MOR reads")
            mode = COMMIT_TIME  # payload-based v6 tables resolve to one of the two (config.py)
        self.event_time = mode == EVENT_TIME and bool(self.ordering)
        self.schema = schema  # merge schema: table types, all columns the merge and the query need
        self.partial = partial
        #: what the winners folded under this spec depend on beside the log blocks (a cache key)
        self.fingerprint = (tuple(self.key_fields), tuple(self.ordering), self.event_time, delete_marker, partial,
                            schema.to_string(show_schema_metadata=False))

    @classmethod
    def for_context(cls, ctx: ReadContext) -> "MergeSpec":
        """The spec of ``ctx``'s table and columns, kept per table config, table schema and read
        columns: every point query plans a new context, its table's spec stays the same. A kept
        entry holds its config and schema, so their ids are not reused while it is kept."""
        read_names = tuple(ctx.read_schema.names)
        pruned = ctx.read_schema if ctx.prunes_nested else None  # its structs' types are in part
        key = (id(ctx.config), id(ctx.table_schema), read_names, pruned)
        kept = _SPECS.get(key)
        if kept is not None and kept[0] is ctx.config and kept[1] is ctx.table_schema:
            return kept[2]
        spec = cls._of(ctx.config, ctx.table_schema, pruned if pruned is not None else read_names)
        if len(_SPECS) >= _SPECS_KEPT:
            _SPECS.clear()
        _SPECS[key] = (ctx.config, ctx.table_schema, spec)
        return spec

    @classmethod
    def _of(cls, config: TableConfig, full: pa.Schema, read: tuple[str, ...] | pa.Schema) -> "MergeSpec":
        """``read``: the columns the query reads, by name (their table types) or as a schema
        (a projection keeping structs in part)."""
        key_fields = [RECORD_KEY] if config.populate_meta_fields else list(config.record_key_fields)
        fields = list(read) if isinstance(read, pa.Schema) else [full.field(n) for n in read]
        names = [f.name for f in fields]
        extra = key_fields + list(config.ordering_fields)
        fields += [full.field(n) for n in dict.fromkeys(extra) if n not in names and full.get_field_index(n) >= 0]
        missing = [k for k in key_fields if full.get_field_index(k) < 0]
        if missing:
            raise UnsupportedTableError(f"record key field(s) {missing} not in the table schema; cannot merge logs")
        schema = pa.schema(fields, metadata=full.metadata)
        partial = config.partial_update_mode
        if partial not in (None, IGNORE_DEFAULTS):
            # a log record's marked columns take the previous version's values
            raise UnsupportedTableError(
                f"partial update mode {partial} (hoodie.table.partial.update.mode) is not supported for MOR reads"
            )
        return cls(key_fields, config.ordering_fields, config.merge_mode, schema, config.delete_marker,
                   partial=partial is not None, floats_as_text=widens_float_as_text(config.table_version, schema))

    def conform(self, records: pa.Table) -> pa.Table:
        """Log ``records`` (any writer's schema) in the merge schema, a float widened to double
        as the table's Hudi release widens it (:mod:`catalog.format.float_text`)."""
        return conform_table(floats_as_text(records, self.schema) if self.floats_as_text else records, self.schema)

    # -- keys ---------------------------------------------------------------------------
    def keys(self, data: pa.Table | pa.RecordBatch) -> pa.Array:
        """Record keys as Hudi spells them: the meta column, or the key rebuilt from key fields
        (one field: its value; several: ``f1:v1,f2:v2``; null/empty values as Hudi marks them)."""
        if self.key_fields == [RECORD_KEY]:
            col = data.column(RECORD_KEY)
            return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        parts = []
        for name in self.key_fields:
            col = data.column(name)
            col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
            text = pc.cast(col, pa.string())
            text = pc.if_else(pc.equal(text, ""), EMPTY_KEY, text).fill_null(NULL_KEY)
            parts.append(text if len(self.key_fields) == 1 else pc.binary_join_element_wise(f"{name}:", text, ""))
        if len(parts) == 1:
            return parts[0]
        return pc.binary_join_element_wise(*parts, ",")


def conform_table(data: pa.Table, schema: pa.Schema) -> pa.Table:
    """``data`` with exactly ``schema``'s columns, matched by name and cast (absent -> null)."""
    arrays = []
    for field in schema:
        idx = data.schema.get_field_index(field.name)
        if idx >= 0:
            arrays.append(cast_array(data.column(idx), field.type))
        else:
            arrays.append(pa.nulls(data.num_rows, field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def _flags(n: int, value: bool) -> pa.BooleanArray:
    """``n`` times ``value``, built in Arrow (the reader needs no numpy)."""
    nulls = pa.nulls(n, pa.bool_())
    return pc.is_null(nulls) if value else pc.is_valid(nulls)


def _positions(n: int, start: int = 0) -> pa.Int64Array:
    """``start, start + 1, ..., start + n - 1``."""
    positions = pc.indices_nonzero(_flags(n, True)).cast(pa.int64())
    return pc.add(positions, start) if start else positions


def _with_flags(data: pa.Table, keys: pa.Array, seq_start: int, delete: pa.Array, ctdel: pa.Array) -> pa.Table:
    n = data.num_rows
    return (
        data.append_column(_KEY, keys)
        .append_column(_SEQ, _positions(n, seq_start))
        .append_column(_DEL, delete)
        .append_column(_CTDEL, ctdel)
    )


def data_rows(spec: MergeSpec, records: pa.Table, seq: int) -> pa.Table:
    """Log data records (any schema) as merge rows numbered from ``seq``; records flagged by
    ``_hoodie_is_deleted``, operation ``D`` or the table's delete marker become deletes carrying
    their ordering value."""
    data = spec.conform(records)
    ctdel = _flags(data.num_rows, False)
    return _with_flags(data, spec.keys(data), seq, delete_flags(spec, records), ctdel)


def delete_flags(spec: MergeSpec, records: pa.Table) -> pa.BooleanArray:
    """Per log data record (any schema): flagged by ``_hoodie_is_deleted``, operation ``D`` or
    the table's delete marker, read from the records as written (the table schema may not
    declare them)."""
    delete = _flags(records.num_rows, False)
    if IS_DELETED in records.column_names:
        flag = cast_array(records.column(IS_DELETED), pa.bool_()).combine_chunks()
        delete = pc.or_(delete, pc.fill_null(flag, False))
    if OPERATION_COLUMN in records.column_names:
        op = records.column(OPERATION_COLUMN).combine_chunks()
        delete = pc.or_(delete, pc.fill_null(pc.equal(op, "D"), False))
    if spec.delete_marker is not None and spec.delete_marker[0] in records.column_names:
        column, marker = spec.delete_marker
        text = pc.cast(records.column(column).combine_chunks(), pa.string())
        delete = pc.or_(delete, pc.fill_null(pc.equal(text, marker), False))
    return delete


def _is_default_ordering(value: object) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0)


def delete_rows(spec: MergeSpec, deletes: DeleteRecords, seq: int) -> pa.Table:
    """Delete-block keys as merge rows (null payload) numbered from ``seq``."""
    n = len(deletes)
    columns = {f.name: pa.nulls(n, f.type) for f in spec.schema}
    default = commit_time_deletes(deletes)
    ordering = delete_ordering(spec, deletes, default)
    if ordering is not None:
        columns[spec.ordering[0]] = ordering
    data = pa.Table.from_pydict(columns, schema=spec.schema)
    return _with_flags(data, deletes.record_keys, seq, _flags(n, True), pa.array(default, pa.bool_()))


def commit_time_deletes(deletes: DeleteRecords) -> list[bool]:
    """Per delete: it carries no ordering value (Hudi's default ``0``), a commit-time delete."""
    return [_is_default_ordering(v) for v in deletes.ordering_values]


def delete_ordering(spec: MergeSpec, deletes: DeleteRecords, default: list[bool]) -> pa.Array | None:
    """The deletes' values of the first ordering field (``None``: all null): those that carry one,
    cast to the field's type; all null when they cannot be (incomparable: as if none)."""
    if not spec.ordering or all(default):
        return None
    first = spec.schema.field(spec.ordering[0])
    values = [None if d else v for v, d in zip(deletes.ordering_values, default)]
    try:
        return cast_array(pa.array(values), first.type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError):
        return None


def _last_per_key(rows: pa.Table, columns: list[str]) -> pa.Table:
    """Sort ascending by ``columns`` (key first, nulls first) and keep the last row of each key."""
    rows = rows.take(pc.sort_indices(rows, sort_keys=[(c, "ascending", "at_start") for c in columns]))
    keys = rows.column(_KEY).combine_chunks()
    n = len(keys)
    if n <= 1:
        return rows
    last = pc.not_equal(keys.slice(0, n - 1), keys.slice(1))
    mask = pa.concat_arrays([last, pa.array([True])])
    return rows.filter(mask)


def reduce_winners(spec: MergeSpec, rows: pa.Table) -> pa.Table:
    """One row per key: the version that wins among ``rows`` (section 7.2 step 1, 7.3)."""
    rows = rows.filter(pc.is_valid(rows.column(_KEY)))
    if rows.num_rows == 0:
        return rows
    if spec.partial:
        return fold_in_order(rows, _KEY, _SEQ, lambda older, newer: _partial_step(spec, older, newer))
    if not spec.event_time:
        return _last_per_key(rows, [_KEY, _SEQ])
    ctdel = rows.column(_CTDEL)
    if pc.any(ctdel).as_py():
        # Rows older than a key's last commit-time delete are gone, whatever their ordering.
        last_del = rows.select([_KEY, _SEQ]).filter(ctdel).group_by(_KEY).aggregate([(_SEQ, "max")])
        pos = pc.index_in(rows.column(_KEY), value_set=last_del.column(_KEY).combine_chunks())
        cut = last_del.column(f"{_SEQ}_max").combine_chunks().take(pos)
        keep = pc.or_kleene(pc.is_null(cut), pc.greater_equal(rows.column(_SEQ), cut))
        rows = rows.filter(keep)
    # A surviving commit-time delete ranks below every later write of its key.
    rows = rows.append_column("__hf_rank", pc.invert(rows.column(_CTDEL)))
    return _last_per_key(rows, [_KEY, "__hf_rank", *spec.ordering, _SEQ]).drop_columns(["__hf_rank"])


def _partial_step(spec: MergeSpec, older: pa.Table, newer: pa.Table) -> pa.Table:
    """Two versions of the same keys merged (a log fold step): the later write wins, or under
    EVENT_TIME the greater ordering value (ties and commit-time deletes on either side: the later
    write); the winner's nulls take the loser's values unless either is a delete."""
    pick_newer = _flags(newer.num_rows, True)
    if spec.event_time:
        older_wins = _greater(spec, older, newer, nulls_smallest=True)
        either_ctdel = pc.or_(older.column(_CTDEL).combine_chunks(), newer.column(_CTDEL).combine_chunks())
        pick_newer = pc.or_(either_ctdel, pc.invert(older_wins))
    high, low = choose(pick_newer, older, newer), choose(pick_newer, newer, older)
    no_delete = pc.invert(pc.or_(older.column(_DEL).combine_chunks(), newer.column(_DEL).combine_chunks()))
    return fill_defaults(high, low, spec.schema.names, no_delete)


def _greater(spec: MergeSpec, base: pa.RecordBatch | pa.Table, winners: pa.Table,
             nulls_smallest: bool = False) -> pa.Array:
    """Row-wise: base ordering value(s) strictly greater than the winners' (lexicographic; a null
    compares as neither, or with ``nulls_smallest`` as below every value, as the log sort has it)."""
    result = _flags(base.num_rows, False)
    equal_so_far = _flags(base.num_rows, True)
    for name in spec.ordering:
        b = base.column(name)
        b = b.combine_chunks() if isinstance(b, pa.ChunkedArray) else b
        w = winners.column(name).combine_chunks()
        gt = pc.fill_null(pc.greater(b, w), False)
        eq = pc.fill_null(pc.equal(b, w), False)
        if nulls_smallest:
            gt = pc.or_(gt, pc.and_(pc.is_valid(b), pc.is_null(w)))
            eq = pc.or_(eq, pc.and_(pc.is_null(b), pc.is_null(w)))
        result = pc.or_(result, pc.and_(equal_so_far, gt))
        equal_so_far = pc.and_(equal_so_far, eq)
    return result


#: ``decode(block)``: a data block's records or a delete block's keys
BlockDecoder = Callable[[LogBlock], Decoded]
#: ``index(block, decoded)``: where each merge key sits in the decoded block (kept beside it)
KeyIndex = Callable[[LogBlock, Decoded], KeyRows]


#: one valid log block's rows a merge needs: its data records or its delete keys
LogPart: TypeAlias = pa.Table | DeleteRecords


def log_parts(
    spec: MergeSpec,
    storage: Storage,
    blocks: Sequence[LogBlock],
    column_map: Callable[[str | None], ColumnMap | None] | None = None,
    decode: BlockDecoder | None = None,
    point: PointLookup | None = None,
    index: KeyIndex | None = None,
) -> Iterator[LogPart]:
    """Decode ``blocks`` in order: each one's data records (renamed to the read schema) or delete
    keys, empty ones skipped (``column_map``: schema on read, the renames/drops of a block written
    at an instant; ``decode``: how a block is decoded, by default from its content read now;
    ``point``: only the rows of its keys are kept, found through ``index`` where given)."""
    if decode is None:
        decode = lambda block: decode_record_block(block, block.load_content(storage))  # noqa: E731
    for block in blocks:
        if spec.partial:
            check_defaults(block)
        decoded = decode(block)
        if isinstance(decoded, DeleteRecords):
            keyed = index(block, decoded) if index is not None and point is not None else None
            deletes = deletes_of(decoded, point.keys, keyed) if point is not None else decoded
            if len(deletes):
                yield deletes
            continue
        records: pa.Table | None = decoded
        if column_map is not None:
            records = rename_columns(decoded, column_map(block.instant_time))
        if point is not None:
            # a block's keys are indexed as decoded: renamed columns are narrowed by value
            keyed = index(block, decoded) if index is not None and column_map is None else None
            records = records_of(spec, records, point.keys, keyed)
        if records is not None and records.num_rows:
            yield records


def fold_winners(spec: MergeSpec, parts: Iterable[LogPart]) -> pa.Table | None:
    """Fold the log ``parts`` (oldest first) into the winner table, in steps (bounded memory)."""
    winners: pa.Table | None = None
    pending: list[pa.Table] = []
    pending_rows = 0
    seq = 0
    for part in parts:
        rows = delete_rows(spec, part, seq) if isinstance(part, DeleteRecords) else data_rows(spec, part, seq)
        seq += rows.num_rows
        pending.append(rows)
        pending_rows += rows.num_rows
        if pending_rows >= _REDUCE_AT and pending_rows > (winners.num_rows if winners is not None else 0):
            winners = reduce_winners(spec, pa.concat_tables(([winners] if winners is not None else []) + pending))
            pending, pending_rows = [], 0
    if pending:
        winners = reduce_winners(spec, pa.concat_tables(([winners] if winners is not None else []) + pending))
    return winners


def _payload(spec: MergeSpec, rows: pa.Table) -> Iterator[pa.RecordBatch]:
    rows = rows.drop_columns([c for c in _INTERNAL if c in rows.column_names])
    for batch in rows.combine_chunks().to_batches():
        if batch.num_rows:
            yield batch


def fill_constants(rows: pa.Table, constants: dict[str, pa.Scalar]) -> pa.Table:
    """Partition values for tables that drop partition columns from data files."""
    for name, value in constants.items():
        idx = rows.schema.get_field_index(name)
        if idx >= 0:
            field = rows.schema.field(idx)
            rows = rows.set_column(idx, field, pa.repeat(pa.scalar(value.as_py(), field.type), rows.num_rows))
    return rows


# A point read's keys are plain record keys (``catalog.plan.prune.record_key_values``): the log
# rows of other keys cannot reach its answer (the row filter pins the keys after the merge), so
# they are dropped before they become merge rows.


def key_in(keys: pa.Array, wanted: tuple[str, ...]) -> pa.Array:
    if not (pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type)):
        keys = pc.cast(keys, pa.string())  # e.g. dictionary-encoded keys of a Parquet block
    return pc.is_in(keys, value_set=pa.array(wanted, keys.type))


def records_of(
    spec: MergeSpec, records: pa.Table, wanted: tuple[str, ...], index: KeyRows | None
) -> pa.Table | None:
    """The data records of the ``wanted`` keys (a block lacking a key column: all of them; their
    merge keys are null or the null marker, as without narrowing), found through ``index``
    where given (``None``: it holds none of them)."""
    if any(records.schema.get_field_index(name) < 0 for name in spec.key_fields):
        return records
    if index is None:
        return records.filter(key_in(spec.keys(records), wanted))
    rows = index.positions(wanted)
    if not rows:
        return None
    return records if len(rows) == records.num_rows else records.take(pa.array(rows, pa.int64()))


def deletes_of(deletes: DeleteRecords, wanted: tuple[str, ...], index: KeyRows | None) -> DeleteRecords:
    """The deletes of the ``wanted`` keys, found through ``index`` where given."""
    if index is not None:
        rows = index.positions(wanted)
        if not rows:
            return DeleteRecords(deletes.record_keys.slice(0, 0), deletes.partition_paths.slice(0, 0), [])
        if len(rows) == len(deletes):
            return deletes
        positions = pa.array(rows, pa.int64())
    else:
        positions = pc.indices_nonzero(key_in(deletes.record_keys, wanted))
    ordering = deletes.ordering_values
    return DeleteRecords(
        deletes.record_keys.take(positions),
        deletes.partition_paths.take(positions),
        [ordering[i] for i in positions.to_pylist()],
    )


class FilteredMerge:
    """A merge whose merged rows a row filter then filters, narrowed to the keys that can pass it.

    A merged row is one of its key's versions (the base row, the winning log row) or nothing (a
    delete), so a key can pass the filter only if one of its versions does: a base row no log
    record changes reaches the answer as it is, and a changed one only where it, or the log
    version that replaces it, passes. So the base file is read for the rows the filter matches
    and those of the keys whose log version passes (:meth:`base_filter`), and merged with the
    winners of those keys alone (:meth:`merge`): a warm filter query on a slice works in
    proportion to the rows that can pass, not to the slice or its logs. Not for partial updates
    (a folded row may pass where neither version does) nor keys rebuilt from several fields.
    """

    def __init__(self, spec: MergeSpec, winners: pa.Table, passing_keys: pa.Array):
        self.spec = spec
        self.winners = winners
        self.passing_keys = passing_keys

    @classmethod
    def of(cls, spec: MergeSpec, winners: pa.Table, row_filter: pc.Expression) -> "FilteredMerge | None":
        """The narrowed merge of ``winners`` (``None`` where it does not apply: see the class)."""
        if spec.partial or spec.key_fields != [RECORD_KEY]:
            return None
        passing = rows_matching(winners, row_filter & pc.invert(pc.field(_DEL)))
        return cls(spec, winners, passing.column(_KEY).combine_chunks())

    def base_filter(
        self, row_filter: pc.Expression, filter_columns: Sequence[str]
    ) -> tuple[pc.Expression, tuple[str, ...]]:
        """The filter (and its columns) of the base rows to read: those ``row_filter`` matches and
        those of the keys whose log version passes it."""
        if len(self.passing_keys) == 0:
            return row_filter, tuple(filter_columns)
        changed = pc.field(RECORD_KEY).isin(self.passing_keys)
        return row_filter | changed, tuple(dict.fromkeys([*filter_columns, RECORD_KEY]))

    def merge(
        self, base: Iterable[pa.RecordBatch], *, emit_inserts: bool = True, other_base_keys: pa.Array | None = None
    ) -> Iterator[pa.RecordBatch]:
        """The base rows read with :meth:`base_filter` merged with the winners of their keys and
        of the keys whose log version passes (the rows of other keys cannot pass)."""
        batches = [batch for batch in base if batch.num_rows]
        key_type = self.passing_keys.type
        keys = pa.concat_arrays([self.passing_keys, *(self.spec.keys(b).cast(key_type) for b in batches)])
        winners = self.winners.filter(pc.is_in(self.winners.column(_KEY), value_set=keys))
        if winners.num_rows == 0:
            yield from batches
            return
        yield from merge_batches(self.spec, batches, winners, emit_inserts=emit_inserts,
                                 other_base_keys=other_base_keys)


def merge_batches(
    spec: MergeSpec,
    base: Iterable[pa.RecordBatch],
    winners: pa.Table,
    *,
    emit_inserts: bool = True,
    other_base_keys: pa.Array | None = None,
) -> Iterator[pa.RecordBatch]:
    """Stream ``base`` batches (merge schema) against the log ``winners`` (section 7.2 steps 2-4).

    ``other_base_keys``: keys of base rows outside ``base`` (other splits), which are not inserts.
    """
    winner_keys = winners.column(_KEY).combine_chunks()
    seen: list[pa.Array] = []  # positions of the winners a base row matched
    for batch in base:
        idx = pc.index_in(spec.keys(batch), value_set=winner_keys)
        matched = pc.is_valid(idx)
        if not pc.any(matched).as_py():
            yield batch
            continue
        seen.append(idx.filter(matched))
        if spec.event_time:
            taken = winners.select([*spec.ordering, _CTDEL]).take(pc.fill_null(idx, 0))
            not_ctdel = pc.invert(taken.column(_CTDEL).combine_chunks())
            base_wins = pc.and_(pc.and_(matched, not_ctdel), _greater(spec, batch, taken))
        else:
            base_wins = _flags(batch.num_rows, False)
        replacing = pc.and_(matched, pc.invert(base_wins))
        if spec.partial:
            base_rows, replaced = _partial_final(spec, batch, winners, idx, base_wins)
            kept = base_rows.filter(pc.invert(replacing)).combine_chunks().to_batches()
            replaced = replaced.filter(replacing)
        else:
            kept = [batch.filter(pc.invert(replacing))]
            replaced = winners.take(idx.filter(replacing))
        yield from (b for b in kept if b.num_rows)
        yield from _payload(spec, replaced.filter(pc.invert(replaced.column(_DEL))))
    if not emit_inserts:
        return
    if other_base_keys is not None:
        idx = pc.index_in(other_base_keys, value_set=winner_keys)
        seen.append(idx.filter(pc.is_valid(idx)))
    matched_positions = pa.concat_arrays([a.cast(pa.int64()) for a in seen]) if seen else pa.array([], pa.int64())
    unmatched = winners.filter(pc.invert(pc.is_in(_positions(winners.num_rows), value_set=matched_positions)))
    yield from _payload(spec, unmatched.filter(pc.invert(unmatched.column(_DEL))))


def _partial_final(
    spec: MergeSpec, batch: pa.RecordBatch, winners: pa.Table, idx: pa.Array, base_wins: pa.Array
) -> tuple[pa.Table, pa.Table]:
    """Base rows and their log winners (row-aligned to ``batch``) after the partial merge of the
    two: the one that wins keeps its values and takes the other's for its nulls, unless the log
    winner is a delete."""
    base = pa.Table.from_batches([batch])
    taken = winners.take(pc.fill_null(idx, 0))
    merging = pc.and_(pc.is_valid(idx), pc.invert(taken.column(_DEL).combine_chunks()))
    names = [n for n in spec.schema.names if base.schema.get_field_index(n) >= 0]
    return (fill_defaults(base, taken, names, pc.and_(merging, base_wins)),
            fill_defaults(taken, base, names, merging))


__all__ = [
    "EMPTY_KEY",
    "NULL_KEY",
    "BlockDecoder",
    "KeyIndex",
    "LogPart",
    "FilteredMerge",
    "MergeSpec",
    "commit_time_deletes",
    "conform_table",
    "data_rows",
    "delete_flags",
    "delete_ordering",
    "delete_rows",
    "deletes_of",
    "fill_constants",
    "fold_winners",
    "key_in",
    "log_parts",
    "merge_batches",
    "records_of",
    "reduce_winners",
]
