"""Parquet base files read through decoded row groups kept in memory: point reads and filter reads.

A warm query should cost the rows it returns, not the bytes it reads again. Base files are
immutable (:class:`~catalog.format.row_groups.DecodedRowGroups` keys them by full path and
size), so their footers and decoded columns are kept, column by column, per row group:

* a point read (``file.point``, record-key equality) finds its keys' rows in the row groups the
  statistics keep, then takes those rows of the other columns;
* a filter read (any other ``file.filter``) first drops the row groups the footer's statistics
  rule out, then decodes (or takes, kept) only the filter's columns of each row group left and
  evaluates the filter on them; only the row groups holding matching rows have their other
  columns decoded (or taken), and only the matching rows are copied out. A repeated or similar
  filter query on a warm file therefore opens nothing and works in proportion to the rows it
  returns, plus one vectorised evaluation of the filter's own columns.

What the kept columns cannot answer exactly is read by the plain, streaming reader
(:func:`catalog.format.parquet.read_parquet`), which keeps nothing: a filter whose columns the
file stores with other types (or that names a dropped partition column, or a renamed column),
a query projecting structs in part, and a read whose row groups would take more than a quarter
of the cache (a filter too broad to be worth keeping must not evict the hot columns).
"""

from __future__ import annotations

import bisect
from typing import Any, ContextManager, Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.acero as acero
import pyarrow.compute as pc
import pyarrow.parquet as pq

from catalog.errors import CorruptTableError
from catalog.format.base_file import BaseFileRead
from catalog.format.caches import ReadCaches
from catalog.format.parquet import (
    check_base_format,
    conform_batches,
    file_columns_to_read,
    leaves_to_read,
    pushable_filter,
    read_parquet,
    row_groups_matching,
    rows_matching,
)
from catalog.format.parquet_ranges import fetch_chunks, read_footer, sparse_file
from catalog.format.row_groups import DecodedRowGroups, KeyColumn, ParquetFooter, PointLookup
from catalog.storage import Storage

#: a filter read keeps its row groups only when their columns decode to at most this share of the cache
_CACHE_SHARE = 4


def reads_through_cache(file: BaseFileRead) -> bool:
    """Whether a read of ``file`` goes through decoded row groups (given a cache of them): a point
    read or a filtered read. A read of every row streams and keeps nothing."""
    return file.point is not None or file.filter is not None


def read_cached(
    storage: Storage, file: BaseFileRead, caches: ReadCaches, *, native: bool = True
) -> Iterator[pa.RecordBatch]:
    """The rows of ``file`` (batches of ``file.schema``) read through ``caches.row_groups``: a
    point read or a filter read (see the module docstring); what the kept columns cannot answer
    exactly is read by the plain reader, through ``caches``' footers only."""
    decoded = caches.row_groups
    if decoded is None or not reads_through_cache(file):
        raise ValueError("read_cached: a point or filter read, with a cache of decoded row groups")
    check_base_format(file.path)
    kept = _KeptFile(storage, storage.arrow_filesystem() if native else None, file, decoded)
    try:
        read = kept.planned()
        if read is not None:
            yield from read
            return
    except FileNotFoundError as err:  # e.g. cleaned after the plan was made
        raise FileNotFoundError(f"base file missing: {storage.uri}/{file.path}") from err
    except (ConnectionError, TimeoutError):
        raise  # storage trouble, not a damaged file
    except (pa.ArrowInvalid, OSError) as err:  # Arrow reports undecodable pages as OSError
        raise CorruptTableError(f"cannot decode Parquet base file {storage.uri}/{file.path}: {err}") from err
    yield from read_parquet(storage, file, caches, native=native)


class _KeptFile:
    """One base file read through ``decoded``: its footer and row groups decoded on a miss, on
    the calling thread (through ``arrow_fs`` for a local file, so the bytes go straight into
    Arrow's memory, else as byte ranges through fsspec)."""

    def __init__(
        self, storage: Storage, arrow_fs: pa.fs.FileSystem | None, file: BaseFileRead, decoded: DecodedRowGroups
    ):
        self.storage = storage
        self.arrow_fs = arrow_fs
        self.file = file
        self.decoded = decoded
        self.key = decoded.file_key(storage, file.path, file.size)

    def planned(self) -> Iterator[pa.RecordBatch] | None:
        """The read's batches, or ``None`` when the plain reader is to read it (module docstring)."""
        file = self.file
        footer = self.decoded.footer(self.key, self._read_footer)
        columns, to_query = file_columns_to_read(file.schema, footer.schema, file.source_names, file.constants)
        pushed = to_query is None and pushable_filter(
            file.filter, file.filter_columns, footer.schema, file.schema, file.constants
        )
        nested = file.nested and to_query is None
        if file.point is None and (not pushed or nested):
            return None
        groups = list(file.row_groups) if file.row_groups else list(range(footer.metadata.num_row_groups))
        if pushed and file.filter is not None and len(groups) > 1:
            groups = row_groups_matching(footer.metadata, groups, file.filter)
        wanted = _wanted(file.schema, footer.schema, columns, nested)
        bound = self.decoded.max_bytes // _CACHE_SHARE
        if file.point is None and _decoded_bytes(footer.metadata, groups, columns) > bound:
            return None
        return self._batches(footer, groups, wanted, pushed, to_query)

    def _batches(
        self,
        footer: ParquetFooter,
        groups: Sequence[int],
        wanted: dict[str, tuple[str, ...]],
        pushed: bool,
        to_query: Mapping[str, str] | None,
    ) -> Iterator[pa.RecordBatch]:
        file = self.file
        for index in groups:
            if file.point is not None:
                table = self._point_rows(footer, index, wanted, file.point, pushed)
            else:
                table = self._filter_rows(footer, index, wanted)
            if table is None or table.num_rows == 0:
                continue
            yield from conform_batches(
                table.to_batches(), file.schema, constants=file.constants, filter=None if pushed else file.filter,
                rename=to_query, adapt=file.adapt,
            )

    def _point_rows(
        self, footer: ParquetFooter, index: int, wanted: dict[str, tuple[str, ...]], point: PointLookup, pushed: bool
    ) -> pa.Table | None:
        """The rows of row group ``index`` holding the looked-up keys (then the rest of the filter,
        unless the keys are all of it)."""
        filter = self.file.filter
        table = self._columns(footer, index, wanted)
        key_index = table.schema.get_field_index(point.column) if pushed else -1
        if key_index < 0:
            return rows_matching(table, filter) if pushed and filter is not None else table
        keys = table.column(key_index)
        rows = _rows_of_keys(keys, point.keys, self.decoded.key_column(self.key, index, point.column, keys))
        if not rows:
            return None
        # one row (a key lookup): a zero-copy slice, not a copy of every column
        table = table.slice(rows[0], 1) if len(rows) == 1 else table.take(rows)
        return rows_matching(table, filter) if filter is not None and not point.exact else table

    def _filter_rows(self, footer: ParquetFooter, index: int, wanted: dict[str, tuple[str, ...]]) -> pa.Table | None:
        """The rows of row group ``index`` matching the filter: its columns first, the others only
        when a row matches."""
        filter = self.file.filter
        assert filter is not None  # a filter read
        tested = self._columns(footer, index, {name: wanted[name] for name in self.file.filter_columns})
        rows = _matching_rows(tested, filter)
        if len(rows) == 0:
            return None
        table = self._columns(footer, index, wanted)
        return table if len(rows) == table.num_rows else table.take(rows)

    def _columns(self, footer: ParquetFooter, index: int, wanted: Mapping[str, tuple[str, ...]]) -> pa.Table:
        def read(paths: list[str]) -> pa.Table:
            return self._read_row_group(footer, index, paths)

        return self.decoded.columns(self.key, index, wanted, read)

    def _opened(self) -> ContextManager[Any]:
        assert self.arrow_fs is not None  # fsspec reads fetch byte ranges instead
        self.storage.stats.add("open")
        return self.arrow_fs.open_input_file(self.storage.full_path(self.file.path))

    def _read_footer(self) -> pq.FileMetaData:
        if self.arrow_fs is None:
            return read_footer(self.storage, self.file.path, self.file.size or None)
        with self._opened() as fh:
            return pq.read_metadata(fh)

    def _read_row_group(self, footer: ParquetFooter, index: int, paths: list[str]) -> pa.Table:
        path, size = self.file.path, self.file.size
        if self.arrow_fs is None:
            sparse = sparse_file(self.storage, path, size or None)
            fetch_chunks(self.storage, path, sparse, footer.metadata, [index], paths)
            parquet_file = pq.ParquetFile(sparse, metadata=footer.metadata, pre_buffer=False)
            return parquet_file.read_row_group(index, columns=paths, use_threads=False)
        with self._opened() as fh:
            parquet_file = pq.ParquetFile(fh, metadata=footer.metadata, pre_buffer=False)
            return parquet_file.read_row_group(index, columns=paths, use_threads=False)


def _wanted(schema: pa.Schema, physical: pa.Schema, columns: Sequence[str], nested: bool) -> dict[str, tuple[str, ...]]:
    """Each file column to decode -> the paths decoded for it: the column whole, or (``nested``: the
    query projects structs in part) the leaves it needs."""
    if not nested:
        return {name: (name,) for name in columns}
    return {name: tuple(leaves_to_read(schema, physical, [name])) for name in columns}


def _decoded_bytes(metadata: pq.FileMetaData, groups: Sequence[int], columns: Sequence[str]) -> int:
    """About what ``columns`` of row groups ``groups`` take decoded: their uncompressed bytes."""
    tops = set(columns)
    leaves = [i for i in range(metadata.num_columns) if metadata.schema.column(i).path.split(".")[0] in tops]
    return sum(metadata.row_group(g).column(i).total_uncompressed_size for g in groups for i in leaves)


def _matching_rows(table: pa.Table, filter: pc.Expression) -> pa.Array:
    """The rows of ``table`` where ``filter`` is true (not false or null), in row order, evaluated
    on the calling thread."""
    plan = acero.Declaration.from_sequence(
        [acero.Declaration("table_source", acero.TableSourceNodeOptions(table)),
         acero.Declaration("project", acero.ProjectNodeOptions([filter], ["matches"]))]
    )
    return pc.indices_nonzero(plan.to_table(use_threads=False).column(0))


def _rows_of_keys(column: pa.ChunkedArray, keys: tuple[str, ...], facts: KeyColumn) -> list[int]:
    """The rows of ``column`` holding one of ``keys``, in row order. One key (a point query) is
    found by a binary search when the column is ``facts.ascending`` (then its duplicates follow
    it), else by a scan for equality (``pc.index``) that stops at the first match when the
    values are ``facts.unique``, or goes on, so a duplicate is found too."""
    if len(keys) != 1:
        values = pa.array(keys, column.type)
        return pc.indices_nonzero(pc.is_in(column, value_set=values)).to_pylist()
    if facts.ascending:
        return _rows_in_order(column, keys[0])
    key = pa.scalar(keys[0], column.type)
    rows: list[int] = []
    start = 0
    while start < len(column):
        found = pc.index(column, key, start=start or None).as_py()  # no slice for the first scan
        if found < 0:
            break
        rows.append(found)
        if facts.unique:
            break
        start = found + 1
    return rows


class _Values:
    """An array's values as a Python sequence, converted one by one as a search asks for them."""

    __slots__ = ("_array",)

    def __init__(self, array: pa.Array):
        self._array = array

    def __len__(self) -> int:
        return len(self._array)

    def __getitem__(self, index: int) -> Any:
        return self._array[index].as_py()


def _rows_in_order(column: pa.ChunkedArray, key: str) -> list[int]:
    """The rows holding ``key`` in a column of ascending non-null values (one chunk, or none)."""
    if len(column) == 0:
        return []
    values = _Values(column.chunk(0))
    row = bisect.bisect_left(values, key)
    rows = []
    while row < len(values) and values[row] == key:
        rows.append(row)
        row += 1
    return rows


__all__ = ["read_cached", "reads_through_cache"]
