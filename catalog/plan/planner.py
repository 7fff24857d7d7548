"""The planner: a table state and read options -> a :class:`ScanPlan` (schema, context, splits).

Steps, in order: resolve the options' instants (``catalog.plan.options``), bind filters to the
schema, prune partitions (partition values, then partition statistics), build the file slices
partition batch by partition batch (``catalog.fs_view``), prune slices (record index, then column
statistics) and cut them into weighted splits (``catalog.plan.splits``). Everything after the
binding is lazy: splits stream out while later partitions are still being listed.
"""

from __future__ import annotations

import itertools
import weakref
from dataclasses import dataclass, replace
from typing import Iterable, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from catalog.errors import InvalidInstantError, UnsupportedTableError
from catalog.format.row_groups import PointLookup
from catalog.plan.aggregates import Aggregate, metadata_aggregates
from catalog.plan.cdc import check_cdc_table, plan_changes
from catalog.plan.count import count_rows
from catalog.plan.dataset import Fragments, base_file_dataset
from catalog.plan.filters import BoundFilter, bind_filters, to_expression
from catalog.plan.incremental import WrittenFiles
from catalog.plan.options import ReadOptions, ResolvedRead, resolve
from catalog.plan.projection import output_schema, prunes_nested
from catalog.plan.prune import PartitionValuePruner, index_pruners, record_key_values
from catalog.plan.splits import FooterCache, SplitOptions, SplitPlanner
from catalog.read.cdc_json import check_image_schema
from catalog.read.context import COMMIT_TIME_COLUMN, ReadContext
from catalog.state import TableState
from catalog.table.cdc import CDC_SCHEMA
from catalog.table.files import FileSlice, Split
from catalog.table.partitions import dropped_partition_columns

#: partitions whose slices are built together (bounds memory while planning streams)
PARTITION_BATCH = 256


@dataclass(frozen=True, eq=False)
class ScanPlan:
    """A planned read.

    Attributes:
        schema: the result schema.
        context: what :func:`catalog.read.split_reader.read_split` needs for every split.
        options: the options with their instants pinned (see :func:`resolve`).
        splits: the splits, produced lazily as planning proceeds; iterate once (:meth:`count`
            and :meth:`to_dataset` iterate them too: a caller that needs them again plans
            with them listed, ``ScanPlan(..., iter(listed))``).
    """

    schema: pa.Schema
    context: ReadContext
    options: ReadOptions
    splits: Iterator[Split]

    def count(self, footers: FooterCache | None = None) -> int | None:
        """The rows the read returns, from Parquet footers alone (footer row counts, or column
        statistics with filters: :mod:`catalog.plan.count`); ``None``: they must be read.
        ``footers``: the footer cache planning read through."""
        return count_rows(self.context, list(self.splits), self.options, footers)

    def aggregates(self, aggregates: Sequence[Aggregate], footers: FooterCache | None = None) -> pa.RecordBatch:
        """The one row of ``aggregates`` (``count``, ``min``, ``max``) over the read, from Parquet
        footers alone (:mod:`catalog.plan.aggregates`).

        Raises:
            UnansweredError: the footers do not decide it exactly (the message says why).
        """
        return metadata_aggregates(self.context, list(self.splits), self.options, aggregates, footers)

    def to_dataset(self, fragments: Fragments | None = None) -> ds.Dataset | None:
        """The planned Parquet base files as an Arrow dataset, when they hold exactly the rows the
        read returns before its row filter (:mod:`catalog.plan.dataset`); ``None``: read the splits.
        ``fragments``: the fragments (footers) of earlier datasets to reuse."""
        return base_file_dataset(self.context, list(self.splits), self.options, fragments)


def plan(
    state: TableState,
    options: ReadOptions,
    split_options: SplitOptions | None = None,
    footers: FooterCache | None = None,
) -> ScanPlan:
    """Plan ``options`` on ``state``. Everything that can be wrong with the query (unknown
    column, bad filter value, instant before the first commit) fails here, before any data IO.

    ``footers``: the footer cache split planning reads through (the process-wide one by
    default); a reader given the same cache (:class:`~catalog.format.caches.ReadCaches`) takes
    remote footers from it instead of reading them again.

    Raises:
        InvalidQueryError: bad options, filters or columns (``ValueError``).
        UnsupportedTableError: an incremental read of a table without meta fields.
    """
    if options.cdc:
        return _plan_cdc(state, options)
    if options.incremental and not state.config.populate_meta_fields:
        # Java Hudi refuses these (no commit times to filter on); hudi-rs returns whole file groups.
        raise UnsupportedTableError("incremental queries are not supported when meta fields are disabled")
    resolved, written = _resolve(state, options)
    schema = state.schema_as_of(None if options.incremental else resolved.instant)
    filters = bind_filters(list(options.filters), schema)
    context = _context(state, resolved, filters, schema, _point_lookup(state, options, filters))
    splits = (
        _splits(state, resolved, written, filters, split_options, footers) if resolved.instant is not None else iter(())
    )
    return ScanPlan(context.output_schema, context, resolved.options, splits)


def _resolve(state: TableState, options: ReadOptions) -> tuple[ResolvedRead, WrittenFiles | None]:
    """The options resolved, and for an incremental range the files its commits wrote
    (``catalog.plan.incremental``).

    A range some of whose files the cleaner removed is read as Hudi 1.x reads it (its default
    ``hoodie.datasource.read.incr.fallback.fulltablescan.enable=true``): a full table scan as
    of the latest commit. Hudi 0.x does not fall back (the option is off) and fails when it
    reads a missing file: on a table version 5 or 6 table we refuse such a range.

    Raises:
        InvalidInstantError: a table version 5 or 6 range that would read files the cleaner removed.
    """
    resolved = resolve(options, state.timeline)
    if not options.incremental or resolved.full_table_scan or resolved.instant is None:
        return resolved, None
    written = WrittenFiles.of(state, resolved.incremental_instants)
    if not written.missing:
        return resolved, written
    if state.config.table_version >= 8:
        return replace(resolved, instant=state.timeline.commits[-1].requested_time, full_table_scan=True), None
    if written.reads_missing(resolved.instant):
        raise InvalidInstantError(
            f"the incremental range ({options.start or 'beginning'}, {resolved.options.end}] reads files the "
            "cleaner removed (Hudi 0.x fails on it for a table version 5 or 6 table): start the range later"
        )
    return resolved, written


def _plan_cdc(state: TableState, options: ReadOptions) -> ScanPlan:
    """A CDC query: rows of :data:`CDC_SCHEMA` built per file group (``catalog.plan.cdc``);
    ``columns`` and ``filters`` apply to those columns."""
    check_cdc_table(state)
    check_image_schema(state.schema)
    resolved = resolve(options, state.timeline)
    filters = bind_filters(list(options.filters), CDC_SCHEMA)
    changes, splits = plan_changes(state, resolved) if resolved.instant is not None else (None, [])
    table_schema = state.schema
    context = ReadContext(
        storage=state.storage,
        config=state.config,
        commits=state.timeline.commit_set,
        table_schema=table_schema,
        read_schema=table_schema,
        output_schema=output_schema(CDC_SCHEMA, options.columns),
        instant=resolved.instant,
        row_filter=to_expression(filters),
        filter_columns=tuple(dict.fromkeys(f.column for f in filters)),
        schema_history=state.schema_history,
        cdc=changes,
    )
    return ScanPlan(context.output_schema, context, resolved.options, iter(splits))


def _point_lookup(state: TableState, options: ReadOptions, filters: list[BoundFilter]) -> PointLookup | None:
    """The point lookup of filters pinning record keys (``None``: any other read)."""
    keys = record_key_values(state.config, filters)
    if keys is None:
        return None
    column = state.config.record_key_fields[0]
    exact = not options.incremental and all(f.column == column and f.op in ("=", "in") for f in filters)
    return PointLookup(column, tuple(sorted(keys)), exact)


def _context(
    state: TableState,
    resolved: ResolvedRead,
    filters: list[BoundFilter],
    schema: pa.Schema,
    point: PointLookup | None,
) -> ReadContext:
    options = resolved.options
    history = state.schema_history
    if history is not None and not options.incremental:
        history = history.as_of(resolved.instant)
    out = output_schema(schema, options.columns)
    expr = to_expression(filters)
    needed = [f.column for f in filters]
    if options.incremental:
        commit_time = pc.field(COMMIT_TIME_COLUMN)
        if state.config.table_version >= 8:
            cond = commit_time.isin(pa.array(resolved.incremental_instants, pa.string()))
        else:
            cond = pc.scalar(True)
            if options.start is not None:
                cond = cond & (commit_time > options.start)
            if resolved.incremental_instants and not state.config.is_mor:
                # Hudi 0.x's copy-on-write range keeps commit times from its first active commit
                # on: a range reaching archived commits leaves the rows they wrote out (its
                # merge-on-read range keeps ``(start, end]``; ``catalog.plan.options.resolve``)
                cond = cond & (commit_time >= min(resolved.incremental_instants))
            if options.end is not None:
                cond = cond & (commit_time <= options.end)
        expr = cond if expr is None else expr & cond
        needed.append(COMMIT_TIME_COLUMN)
    names = list(out.names) + [c for c in dict.fromkeys(needed) if c not in out.names]
    # an output struct projected in part is read so (a filter on it tests the struct's own nulls)
    read_schema = pa.schema([out.field(n) if n in out.names else schema.field(n) for n in names],
                            metadata=schema.metadata)
    return ReadContext(
        storage=state.storage,
        config=state.config,
        commits=state.timeline.commit_set,
        table_schema=schema,
        read_schema=read_schema,
        output_schema=out,
        instant=resolved.instant,
        read_optimized=options.read_optimized,
        row_filter=expr,
        filter_columns=tuple(dict.fromkeys(needed)),
        schema_history=history,
        point=point,
        prunes_nested=options.columns is not None and prunes_nested(out, schema),
    )


def _splits(
    state: TableState,
    resolved: ResolvedRead,
    written: WrittenFiles | None,
    filters: list[BoundFilter],
    split_options: SplitOptions | None,
    footers: FooterCache | None,
) -> Iterator[Split]:
    planner = SplitPlanner(state.storage, split_options, footers)
    for slices in _slices(state, resolved, written, filters):  # lazily: nothing is listed before the first split
        yield from planner.plan(slices)


#: each table state's partition-value pruner, which keeps the typed values of its partitions
_VALUE_PRUNERS: weakref.WeakKeyDictionary[TableState, PartitionValuePruner] = weakref.WeakKeyDictionary()


def _value_pruner(state: TableState) -> PartitionValuePruner:
    """The partition-value pruner of ``state`` (made once per state: a warm plan does not type its
    partitions' values again)."""
    pruner = _VALUE_PRUNERS.get(state)
    if pruner is None:
        pruner = _VALUE_PRUNERS.setdefault(state, PartitionValuePruner(state.config, state.schema))
    return pruner


def file_slices(state: TableState, options: ReadOptions) -> Iterator[FileSlice]:
    """The pruned file slices a read of ``options`` covers (before they are cut into splits)."""
    resolved, written = _resolve(state, options)
    if resolved.instant is None:
        return iter(())
    filters = bind_filters(list(options.filters), state.schema)
    return itertools.chain.from_iterable(_slices(state, resolved, written, filters))


def _slices(
    state: TableState, resolved: ResolvedRead, written: WrittenFiles | None, filters: list[BoundFilter]
) -> Iterator[Iterable[FileSlice]]:
    """File slices to read, pruned: yields once, either a list (all partitions fit in one batch:
    the splitter sees how small the plan is) or an iterator streaming a batch of partitions at a
    time. ``written``: an incremental range's files, the only ones it reads."""
    options = resolved.options
    instant = resolved.instant
    latest = state.timeline.latest_commit
    at_latest = latest is not None and instant is not None and instant >= latest.requested_time
    partition_pruners, slice_pruners = index_pruners(
        state.metadata_table, at_latest, state.use_record_index, options.read_optimized
    )
    partitions = state.listing.list_partitions()
    # the stats of a column the data files leave out (its values are the path's) decide nothing
    dropped = dropped_partition_columns(state.config)
    index_filters = [f for f in filters if f.column not in dropped]
    if filters:
        partitions = _value_pruner(state).prune(partitions, filters)
    if index_filters:
        for pruner in partition_pruners:
            partitions = pruner.prune(partitions, index_filters)
    view = state.fs_view
    if written is not None:
        view = written.view
        partitions = [p for p in partitions if p in written.partitions]

    def batch(chunk: list[str]) -> Sequence[FileSlice]:
        slices: Sequence[FileSlice] = list(view.latest_file_slices(chunk, instant, options.read_optimized))
        if state.bootstrap_index is not None:
            slices = state.bootstrap_index.with_sources(slices)
        if index_filters:
            for slice_pruner in slice_pruners:
                slices = slice_pruner.prune(slices, index_filters)
        return slices

    if len(partitions) <= PARTITION_BATCH:
        yield list(batch(partitions))
        return
    yield (fs for i in range(0, len(partitions), PARTITION_BATCH) for fs in batch(partitions[i : i + PARTITION_BATCH]))


__all__ = ["PARTITION_BATCH", "ScanPlan", "file_slices", "plan"]
