"""Reading one merge-on-read file slice: its valid log blocks, its base rows and their merge.

A point read of a few keys whose log rows are few is merged in Python
(:mod:`catalog.read.mor_point`); every other read streams through the vectorised merge
(:mod:`catalog.read.mor`), and so does every read of a table with partial updates (the Python
merge picks one version per key; it does not fold columns). Both give the same rows in the
same order.
"""

from __future__ import annotations

from itertools import chain
from typing import Iterator, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from catalog.format.caches import NO_CACHES, ReadCaches
from catalog.format.log_block import DeleteRecords
from catalog.format.log_cache import Decoded, DecodedLogBlocks, KeyRows
from catalog.format.log_file import LogBlock
from catalog.read.context import ReadContext
from catalog.read.cow import read_base
from catalog.read.log_scan import scan_blocks, valid_blocks
from catalog.read.mor import (
    BlockDecoder,
    FilteredMerge,
    KeyIndex,
    LogPart,
    MergeSpec,
    conform_table,
    fill_constants,
    fold_winners,
    log_parts,
    merge_batches,
)
from catalog.read.mor_point import FEW_ROWS, PointWinners
from catalog.storage import Storage
from catalog.table.files import FileSlice


def merge_file_slice(
    ctx: ReadContext, fs: FileSlice, row_groups: Sequence[int] | None = None, caches: ReadCaches = NO_CACHES
) -> Iterator[pa.RecordBatch]:
    """The merged rows of one MOR file slice for a query (columns: the merge schema), read
    through ``caches``.

    ``row_groups`` restricts the base file; log-only inserts are then emitted by the split that
    holds row group 0, and keys living in other row groups are not re-emitted.
    """
    spec = MergeSpec.for_context(ctx)
    blocks, decode, index = _log_blocks(ctx, fs, spec, caches.log_blocks)
    if not blocks:
        yield from _filtered_base(ctx, fs, spec, row_groups, caches)
        return
    column_map = ctx.column_map if ctx.schema_history is not None else None
    parts = log_parts(spec, ctx.storage, blocks, column_map, decode, ctx.point, index)
    constants = ctx.partition_constants(fs.partition)
    emit_inserts = row_groups is None or 0 in row_groups
    point = None
    if _point_merge(ctx, spec, constants):
        few, parts = _few(parts)
        point = PointWinners.of(spec, few) if few is not None else None
    if point is not None:
        if not point.winners:
            yield from _base(ctx, fs, spec, row_groups, caches)
            return
        base = _base(ctx, fs, spec, row_groups, caches)
        extra_keys = _extra_keys(ctx, spec, fs, row_groups, emit_inserts)
        yield from point.merge(base, emit_inserts=emit_inserts, other_base_keys=extra_keys, constants=constants)
        return
    winners = _winners(ctx, fs, spec, blocks, parts, caches.log_blocks)
    if winners is None or winners.num_rows == 0:
        yield from _filtered_base(ctx, fs, spec, row_groups, caches)
        return
    if constants:
        winners = fill_constants(winners, constants)
    extra_keys = _extra_keys(ctx, spec, fs, row_groups, emit_inserts)
    narrowed = FilteredMerge.of(spec, winners, ctx.row_filter) if _warm_filter(ctx, caches) else None
    if narrowed is not None and ctx.row_filter is not None:
        expr, columns = narrowed.base_filter(ctx.row_filter, ctx.filter_columns)
        base = read_base(ctx, fs, spec.schema, row_groups, expr, columns, caches)
        yield from narrowed.merge(base, emit_inserts=emit_inserts, other_base_keys=extra_keys)
        return
    base = _base(ctx, fs, spec, row_groups, caches)
    yield from merge_batches(spec, base, winners, emit_inserts=emit_inserts, other_base_keys=extra_keys)


def _point_merge(ctx: ReadContext, spec: MergeSpec, constants: dict[str, pa.Scalar] | None) -> bool:
    """Whether the Python merge may take this read: a point read of few keys, no partial updates
    (a version's nulls filled from another: the vectorised fold), no partition constant among
    the ordering fields (they are set after the merge)."""
    return (
        ctx.point is not None
        and len(ctx.point.keys) <= FEW_ROWS
        and not spec.partial
        and not set(constants or ()) & set(spec.ordering)
    )


def _few(parts: Iterator[LogPart]) -> tuple[list[LogPart] | None, Iterator[LogPart]]:
    """All of ``parts`` when they hold at most ``FEW_ROWS`` rows (else ``None``), and the parts
    still to merge: those read so far followed by the rest."""
    taken: list[LogPart] = []
    rows = 0
    for part in parts:
        taken.append(part)
        rows += len(part) if isinstance(part, DeleteRecords) else part.num_rows
        if rows > FEW_ROWS:
            return None, chain(taken, parts)
    return taken, iter(taken)


def _extra_keys(
    ctx: ReadContext, spec: MergeSpec, fs: FileSlice, row_groups: Sequence[int] | None, emit_inserts: bool
) -> pa.Array | None:
    """Keys of the base rows outside this split's row groups, when it emits the inserts."""
    if row_groups is None or not emit_inserts:
        return None
    return _other_row_group_keys(ctx.storage, spec, fs, row_groups)


def _base(
    ctx: ReadContext, fs: FileSlice, spec: MergeSpec, row_groups: Sequence[int] | None, caches: ReadCaches
) -> Iterator[pa.RecordBatch]:
    """The base rows a merge needs: every row, or for a point read whose filter is only its record
    keys, the rows of those keys (a record's key is the same in all its versions: the rows of
    other keys never pass the filter)."""
    if ctx.point is not None and ctx.point.exact:
        return read_base(ctx, fs, spec.schema, row_groups, ctx.row_filter, ctx.filter_columns, caches)
    return read_base(ctx, fs, spec.schema, row_groups, caches=caches)


def _warm_filter(ctx: ReadContext, caches: ReadCaches) -> bool:
    """A filtered read (not an exact point read, which reads its keys' rows) through kept row
    groups: the base file is read for the rows that can reach the answer only."""
    return caches.row_groups is not None and ctx.row_filter is not None and not (ctx.point and ctx.point.exact)


def _filtered_base(
    ctx: ReadContext, fs: FileSlice, spec: MergeSpec, row_groups: Sequence[int] | None, caches: ReadCaches
) -> Iterator[pa.RecordBatch]:
    """The base rows of a slice whose logs change nothing: for a warm filter read the rows the
    filter matches (they are the answer), else as :func:`_base`."""
    if _warm_filter(ctx, caches):
        return read_base(ctx, fs, spec.schema, row_groups, ctx.row_filter, ctx.filter_columns, caches)
    return _base(ctx, fs, spec, row_groups, caches)


def _winners(
    ctx: ReadContext,
    fs: FileSlice,
    spec: MergeSpec,
    blocks: Sequence[LogBlock],
    parts: Iterator[LogPart],
    logs: DecodedLogBlocks | None,
) -> pa.Table | None:
    """The log ``parts`` folded into one winning row per key: for a filtered read (no point
    lookup, no schema on read) through the cache of log blocks, once per set of valid blocks
    and merge (the blocks decide the rows: which count follows from the commits and instant)."""
    if logs is None or ctx.point is not None or ctx.row_filter is None or ctx.schema_history is not None:
        return fold_winners(spec, parts)
    sizes = {path: log.size for path, log in zip(fs.log_file_paths, fs.log_files)}
    return logs.folded(ctx.storage, [(block, sizes[block.path]) for block in blocks], spec.fingerprint,
                       lambda: fold_winners(spec, parts))


def _log_blocks(
    ctx: ReadContext, fs: FileSlice, spec: MergeSpec, logs: DecodedLogBlocks | None
) -> tuple[list[LogBlock], BlockDecoder | None, KeyIndex | None]:
    """The valid log blocks of ``fs``, how to decode one and where its merge keys sit: for a point
    or filtered read, through the cache of log blocks when there is one (``None``, or a read of
    every row, which would only churn it: from content read now, keys compared on every read)."""
    if logs is None or (ctx.point is None and ctx.row_filter is None):
        return valid_blocks(ctx.storage, fs, ctx.commits, ctx.instant), None, None
    files = [(path, log.size) for path, log in zip(fs.log_file_paths, fs.log_files)]
    sizes = dict(files)
    blocks = scan_blocks(logs.blocks(ctx.storage, files), ctx.commits, ctx.instant)

    def decode(block: LogBlock) -> Decoded:
        return logs.decoded(ctx.storage, block, sizes[block.path])

    def index(block: LogBlock, decoded: Decoded) -> KeyRows:
        def keys() -> pa.Array:
            if isinstance(decoded, DeleteRecords):
                return decoded.record_keys
            if any(decoded.schema.get_field_index(name) < 0 for name in spec.key_fields):
                return pa.array([], pa.string())  # never asked: such a block is kept whole
            return spec.keys(decoded)

        return logs.key_rows(ctx.storage, block, sizes[block.path], tuple(spec.key_fields), keys)

    return blocks, decode, index


def _other_row_group_keys(
    storage: Storage, spec: MergeSpec, fs: FileSlice, row_groups: Sequence[int]
) -> pa.Array | None:
    """Record keys of the base row groups outside this split (key columns only)."""
    if fs.base_file_path is None:
        return None
    with storage.open(fs.base_file_path) as fh:
        pf = pq.ParquetFile(fh)
        others = [i for i in range(pf.num_row_groups) if i not in set(row_groups)]
        if not others:
            return None
        key_schema = pa.schema([spec.schema.field(k) for k in spec.key_fields])
        # use_threads=False: decoding threads would read the Python file object from Arrow's pool
        keys = conform_table(pf.read_row_groups(others, columns=spec.key_fields, use_threads=False), key_schema)
    return spec.keys(keys)


__all__ = ["merge_file_slice"]
