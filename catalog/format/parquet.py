"""Parquet base files -> record batches in the table schema.

Local files are scanned by pyarrow's dataset reader over Arrow's native filesystem
(``Storage.arrow_filesystem()``); a filter expression lets it skip row groups by statistics and
drop non-matching rows. Every other protocol is read by ``pyarrow.parquet.ParquetFile`` on the
calling thread (no pre-buffering, no decoding threads) from the column chunks it needs, fetched
through fsspec as coalesced byte ranges (``catalog.format.parquet_ranges``: not whole files), so
no Arrow thread ever calls back into Python: an Arrow thread that takes the GIL, or drops the
last reference to a Python object, while the interpreter finalizes makes the process abort
("terminate called without an active exception"). There row groups are skipped by their
statistics through a metadata-only copy of the footer held in Arrow memory, and the filter is
applied to the decoded batches. Batches are then cast to the table schema by column name: columns the
file lacks become nulls (or a constant, for dropped partition columns), nested structs are
matched field by field (format doc 9.2/9.3).

String columns with few distinct values (Hudi's ``_hoodie_commit_time``,
``_hoodie_partition_path``, ``_hoodie_file_name``, a low-cardinality data column) are decoded as
Arrow dictionaries and cast back to their table type: expanding a small dictionary by index costs
about a third of Parquet's value-by-value dense decoding. Which columns qualify is read from the
footer (see :func:`dictionary_columns`); the batches returned keep the table's types.
"""

from __future__ import annotations

import functools
import posixpath
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.acero as acero
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from catalog.errors import CorruptTableError, UnsupportedTableError
from catalog.format.base_file import BaseFileRead
from catalog.format.caches import NO_CACHES, ReadCaches
from catalog.format.hudi_types import is_vector, vector_from_bytes
from catalog.format.parquet_ranges import SparseFile, fetch_chunks, open_sparse, sparse_file, windows
from catalog.storage import Storage

BATCH_SIZE = 65536
_PARQUET = ds.ParquetFileFormat()
#: a column chunk whose dictionary page is at most this many bytes per value holds few distinct
#: values (a unique key's dictionary is ~ a value's length per value, or it fell back to plain)
_DICTIONARY_BYTES_PER_VALUE = 1 / 16
#: below this many rows read, opening the file a second time (as dictionaries) costs more than
#: it saves
_DICTIONARY_MIN_ROWS = 32_768


def check_base_format(path: str) -> None:
    ext = posixpath.splitext(path)[1].lstrip(".").lower()
    if ext != "parquet":
        raise UnsupportedTableError(f"unsupported base file format: {ext or path}")


def cast_array(arr: pa.Array | pa.ChunkedArray, target: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """Cast with Hudi's evolution rules: structs match children by name, missing children are null."""
    if arr.type.equals(target):
        return arr
    if is_vector(target) and (pa.types.is_fixed_size_binary(arr.type) or pa.types.is_binary(arr.type)):
        if isinstance(arr, pa.ChunkedArray):
            return pa.chunked_array([vector_from_bytes(c, target) for c in arr.chunks], type=target)
        return vector_from_bytes(arr, target)  # a VECTOR's bytes in a Parquet file (Hudi 1.2)
    if pa.types.is_struct(target) and pa.types.is_struct(arr.type):
        if isinstance(arr, pa.ChunkedArray):
            return pa.chunked_array([cast_array(c, target) for c in arr.chunks], type=target)
        names = [arr.type.field(i).name for i in range(arr.type.num_fields)]
        children = []
        for i in range(target.num_fields):
            child = target.field(i)
            if child.name in names:
                children.append(cast_array(arr.field(child.name), child.type))
            else:
                children.append(pa.nulls(len(arr), child.type))
        return pa.StructArray.from_arrays(children, fields=list(target), mask=arr.is_null())
    try:
        return arr.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
        raise CorruptTableError(f"cannot read a {arr.type} column as {target}: {err}") from err


def conform_batch(
    batch: pa.RecordBatch, schema: pa.Schema, constants: Mapping[str, pa.Scalar] | None = None
) -> pa.RecordBatch:
    """``batch`` with exactly the columns of ``schema``, cast by name; absent columns are null
    (or ``constants[name]`` repeated)."""
    if batch.schema.equals(schema):
        return batch
    if len(schema) == 0:
        return batch.select([])  # from_arrays would lose the row count
    arrays = []
    for field in schema:
        idx = batch.schema.get_field_index(field.name)
        if idx >= 0:
            arrays.append(cast_array(batch.column(idx), field.type))
        elif constants and field.name in constants:
            arrays.append(pa.array([constants[field.name].as_py()] * batch.num_rows, field.type))
        else:
            arrays.append(pa.nulls(batch.num_rows, field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def rows_matching(table: pa.Table, expr: pc.Expression) -> pa.Table:
    """The rows of ``table`` satisfying ``expr``, filtered on the calling thread.

    ``pa.Table.filter`` runs an Acero plan on Arrow's CPU pool: for the small tables of a read
    (one batch, one row group) the hand-over between threads costs more than the filtering.
    """
    plan = acero.Declaration.from_sequence(
        [acero.Declaration("table_source", acero.TableSourceNodeOptions(table)),
         acero.Declaration("filter", acero.FilterNodeOptions(expr))]
    )
    return plan.to_table(use_threads=False)


def leaf_paths(wanted: pa.DataType, stored: pa.DataType, name: str) -> list[str]:
    """The dotted paths of the stored leaves a column of type ``wanted`` (a projected struct, or
    the whole column) needs from a file storing it as ``stored``, under the column ``name``:
    ``[name]`` when it needs the column whole. Fields the file lacks are left out (the reader
    fills them with nulls); when none of the wanted fields is stored, the struct's first stored
    leaf is still read, as a struct's own nulls live in its leaves. A name holding a dot cannot
    be told from a path: such a field is read whole (a column so named: all of it)."""
    if "." in name:
        return [name]
    return _leaf_paths(wanted, stored, name)


def _leaf_paths(wanted: pa.DataType, stored: pa.DataType, prefix: str) -> list[str]:
    if not (pa.types.is_struct(wanted) and pa.types.is_struct(stored)):
        return [prefix]
    stored_fields = {f.name: f for f in stored}
    paths: list[str] = []
    whole = len(wanted) == len(stored_fields)
    for child in wanted:
        found = stored_fields.get(child.name)
        if found is None:
            whole = False
            continue
        path = f"{prefix}.{child.name}"
        below = [path] if "." in child.name else _leaf_paths(child.type, found.type, path)
        whole = whole and below == [path]
        paths.extend(below)
    if whole or any("." in f.name for f in stored):
        return [prefix]  # (a dotted field name would make the paths ambiguous)
    return paths or _first_leaf(stored, prefix)


def _first_leaf(stored: pa.DataType, prefix: str) -> list[str]:
    first = stored.field(0) if stored.num_fields else None
    if first is None:
        return [prefix]
    if pa.types.is_struct(first.type):
        return _first_leaf(first.type, f"{prefix}.{first.name}")
    return [f"{prefix}.{first.name}"]


def file_columns_to_read(
    schema: pa.Schema,
    physical: pa.Schema,
    source_names: Mapping[str, str] | None,
    constants: Mapping[str, pa.Scalar] | None = None,
) -> tuple[list[str], dict[str, str] | None]:
    """The file's columns to decode for ``schema``, and (schema on read) file name -> query name.

    ``source_names`` maps query names to file names; columns it leaves out are absent from the file.
    Columns of ``constants`` are never decoded: a partition column the table leaves out of its data
    files comes from the path even where a file holds it (Hudi 1.1 writes it into the base file a
    merge rewrites, null for the rows it carries over; Hudi's readers take the path's value).
    """
    names = [n for n in schema.names if not constants or n not in constants]
    if source_names is None:
        return [name for name in names if physical.get_field_index(name) >= 0], None
    to_query = {source_names[n]: n for n in names if n in source_names}
    return [c for c in to_query if physical.get_field_index(c) >= 0], to_query


def leaves_to_read(schema: pa.Schema, physical: pa.Schema, columns: Sequence[str]) -> list[str]:
    """``columns`` (top-level names) with each projected struct narrowed to the leaf paths it
    needs from the file (:func:`leaf_paths`)."""
    out = []
    for name in columns:
        out.extend(leaf_paths(schema.field(name).type, physical.field(name).type, name))
    return out


def conform_batches(
    batches: Iterable[pa.RecordBatch],
    schema: pa.Schema,
    *,
    constants: Mapping[str, pa.Scalar] | None = None,
    filter: pc.Expression | None = None,
    rename: Mapping[str, str] | None = None,
    adapt: Callable[[pa.RecordBatch], pa.RecordBatch] | None = None,
) -> Iterator[pa.RecordBatch]:
    """Decoded base-file batches -> non-empty batches of ``schema`` holding the rows that match.

    ``rename`` maps file column names to query names (schema on read), ``adapt`` then maps
    nested fields; ``filter`` (when not already applied by the decoder) is applied exactly.
    """
    for batch in batches:
        if batch.num_rows == 0:
            continue
        if rename is not None:
            batch = batch.rename_columns([rename[c] for c in batch.schema.names])
        if adapt is not None:
            batch = adapt(batch)
        out = conform_batch(batch, schema, constants)
        if filter is not None:
            kept = rows_matching(pa.Table.from_batches([out]), filter).combine_chunks().to_batches()
            if not kept or kept[0].num_rows == 0:
                continue
            out = kept[0]
        yield out


def pushable_filter(
    expr: pc.Expression | None,
    filter_columns: Sequence[str],
    physical: pa.Schema,
    schema: pa.Schema,
    constants: Mapping[str, pa.Scalar] | None,
) -> bool:
    """Only hand the filter to the Parquet reader when the file has its columns with the table's
    types (and none of them is a constant, whose value the file does not hold)."""
    if expr is None:
        return False
    for name in filter_columns:
        if constants and name in constants:
            return False
        idx = physical.get_field_index(name)
        if idx < 0 or not physical.field(idx).type.equals(schema.field(name).type):
            return False
    return True


def row_groups_matching(metadata: pq.FileMetaData, groups: list[int] | None, filter: pc.Expression) -> list[int]:
    """The row groups (of ``groups``, or all) whose statistics may hold rows matching ``filter``,
    decided by Arrow's own pruning over a metadata-only Parquet file in an Arrow buffer: no Python
    object is handed to Arrow. Statistics Arrow cannot use prune nothing."""
    sink = pa.BufferOutputStream()
    try:
        metadata.write_metadata_file(sink)
        fragment = _PARQUET.make_fragment(pa.BufferReader(sink.getvalue()), row_groups=groups)
        kept = [rg.id for rg in fragment.subset(filter).row_groups]
    except (pa.ArrowException, OSError):
        return groups if groups is not None else list(range(metadata.num_row_groups))
    return kept


def read_parquet(
    storage: Storage,
    file: BaseFileRead,
    caches: ReadCaches = NO_CACHES,
    *,
    native: bool = True,
    batch_size: int = BATCH_SIZE,
) -> Iterator[pa.RecordBatch]:
    """Stream the rows of one Parquet base file as batches of ``file.schema``.

    ``file.filter`` is applied exactly (pushed into the reader when the file's types allow,
    else after the cast). ``native``: a local file is read through Arrow's own filesystem
    (``False``, or any other store: through fsspec on the calling thread, see the module
    docstring). ``caches``: a remote file of known size takes its footer from
    ``caches.footers`` (decoded row groups are kept by :mod:`catalog.format.parquet_cached`,
    not here: a plain read streams and keeps nothing).
    """
    check_base_format(file.path)
    arrow_fs = storage.arrow_filesystem() if native else None
    path, size, schema, filter, constants = file.path, file.size, file.schema, file.filter, file.constants
    full = storage.full_path(path)
    groups = list(file.row_groups) if file.row_groups else None
    try:
        if arrow_fs is not None:
            storage.stats.add("open")
            fragment = _PARQUET.make_fragment(full, filesystem=arrow_fs, file_size=size or None, row_groups=groups)
            physical = fragment.physical_schema
        else:
            if caches.footers is not None and size:
                sparse = sparse_file(storage, path, size)
                metadata = caches.footers.footer(storage, path, size)
                parquet_file = pq.ParquetFile(sparse, metadata=metadata, pre_buffer=False)
            else:
                sparse = open_sparse(storage, path, size or None)
                parquet_file = pq.ParquetFile(sparse, pre_buffer=False)
            physical = parquet_file.schema_arrow
    except FileNotFoundError as err:  # e.g. cleaned after the plan was made
        raise FileNotFoundError(f"base file missing: {storage.uri}/{path}") from err
    except (pa.ArrowInvalid, OSError) as err:
        raise CorruptTableError(f"cannot read Parquet base file {storage.uri}/{path}: {err}") from err
    columns, to_query = file_columns_to_read(schema, physical, file.source_names, constants)
    paths = leaves_to_read(schema, physical, columns) if file.nested and to_query is None else None
    pushable = to_query is None and pushable_filter(filter, file.filter_columns, physical, schema, constants)
    pushed = arrow_fs is not None and pushable and paths is None
    try:
        # the filter's columns keep their file types: statistics prune row groups by them
        metadata = fragment.metadata if arrow_fs is not None else parquet_file.metadata
        as_dictionary = dictionary_columns(metadata, physical, columns, groups, exclude=file.filter_columns)
        # use_threads=False: splits are already read in parallel (catalog.read.split_reader).
        if paths is not None and arrow_fs is not None:
            # the dataset reader takes a dotted name for the leaf alone (losing the struct's own
            # nulls): Parquet's reader keeps the struct around the leaves it decodes
            if pushable and filter is not None:
                groups = row_groups_matching(metadata, groups, filter)
            storage.stats.add("open")
            with arrow_fs.open_input_file(full) as source:
                parquet_file = pq.ParquetFile(
                    source, metadata=metadata, pre_buffer=False, read_dictionary=as_dictionary or None
                )
                batches = parquet_file.iter_batches(
                    batch_size=batch_size, row_groups=groups, columns=paths, use_threads=False
                )
                yield from conform_batches(batches, schema, constants=constants, filter=filter, adapt=file.adapt)
            return
        if arrow_fs is not None:
            if as_dictionary:
                fragment = _dictionary_format(frozenset(as_dictionary)).make_fragment(
                    full, filesystem=arrow_fs, file_size=size or None, row_groups=groups
                )
            batches = fragment.to_batches(
                columns=columns, filter=filter if pushed else None, batch_size=batch_size, use_threads=False
            )
        else:
            if pushable and filter is not None:
                groups = row_groups_matching(parquet_file.metadata, groups, filter)
            if as_dictionary:
                parquet_file = pq.ParquetFile(
                    sparse, metadata=parquet_file.metadata, pre_buffer=False, read_dictionary=as_dictionary
                )
            batches = _ranged_batches(storage, path, sparse, parquet_file, groups, paths or columns, batch_size)
        yield from conform_batches(
            batches, schema, constants=constants, filter=None if pushed else filter, rename=to_query, adapt=file.adapt
        )
    except (FileNotFoundError, ConnectionError, TimeoutError):
        raise  # storage trouble, not a damaged file
    except (pa.ArrowInvalid, OSError) as err:  # Arrow reports undecodable pages as OSError
        raise CorruptTableError(f"cannot decode Parquet base file {storage.uri}/{path}: {err}") from err


def _ranged_batches(
    storage: Storage,
    path: str,
    file: SparseFile,
    parquet_file: pq.ParquetFile,
    groups: list[int] | None,
    columns: list[str],
    batch_size: int,
) -> Iterator[pa.RecordBatch]:
    """The batches of ``groups`` (``None``: all), decoded from their column chunks of ``columns``
    fetched window by window (``catalog.format.parquet_ranges``), each released once decoded.
    The next window's chunks are fetched on a Python thread while this one decodes."""
    metadata = parquet_file.metadata
    runs = windows(metadata, range(metadata.num_row_groups) if groups is None else groups, columns)
    if not runs:
        return
    with ThreadPoolExecutor(1, thread_name_prefix="hudi-parquet-prefetch") as pool:
        fetched = fetch_chunks(storage, path, file, metadata, runs[0], columns)
        for index, window in enumerate(runs):
            ahead = None
            if index + 1 < len(runs):
                ahead = pool.submit(fetch_chunks, storage, path, file, metadata, runs[index + 1], columns)
            yield from parquet_file.iter_batches(
                batch_size=batch_size, row_groups=window, columns=columns, use_threads=False
            )
            file.release(fetched)
            if ahead is not None:
                fetched = ahead.result()


def dictionary_columns(
    metadata: pq.FileMetaData,
    physical: pa.Schema,
    columns: Sequence[str],
    row_groups: Sequence[int] | None,
    exclude: Sequence[str] = (),
) -> list[str]:
    """The top-level string/binary ``columns`` cheaper to decode as dictionaries: every column
    chunk of ``row_groups`` (``None``: all) is dictionary-encoded, and their dictionary pages
    hold at most ``_DICTIONARY_BYTES_PER_VALUE`` bytes per value in all. ``exclude`` keeps
    columns out; a read of fewer than ``_DICTIONARY_MIN_ROWS`` rows decodes every column dense.

    High-cardinality columns are left dense: a large dictionary, or one that fell back to plain
    pages, would cost Arrow a hash per value (several times the dense decoding).
    """
    groups = list(row_groups) if row_groups is not None else list(range(metadata.num_row_groups))
    if sum(metadata.row_group(g).num_rows for g in groups) < _DICTIONARY_MIN_ROWS:
        return []
    leaves = {metadata.schema.column(i).path: i for i in range(metadata.num_columns)}
    chosen = []
    for name in columns:
        field = physical.field(name)
        leaf = leaves.get(name)  # a nested column's leaves are named by their path
        if name in exclude or leaf is None or not _is_plain_string(field.type):
            continue
        sizes = [_dictionary_page_bytes(metadata.row_group(g).column(leaf)) for g in groups]
        values = sum(metadata.row_group(g).column(leaf).num_values for g in groups)
        if None not in sizes and sum(s or 0 for s in sizes) <= values * _DICTIONARY_BYTES_PER_VALUE:
            chosen.append(name)
    return chosen


def _is_plain_string(type_: pa.DataType) -> bool:
    return any(check(type_) for check in (pa.types.is_string, pa.types.is_large_string,
                                          pa.types.is_binary, pa.types.is_large_binary))


def _dictionary_page_bytes(chunk: pq.ColumnChunkMetaData) -> int | None:
    """Bytes of the chunk's dictionary page (its header included); ``None``: it has none."""
    start = chunk.dictionary_page_offset
    if not chunk.has_dictionary_page or start is None:
        return None
    return int(chunk.data_page_offset - start)


@functools.lru_cache(maxsize=64)
def _dictionary_format(columns: frozenset[str]) -> ds.ParquetFileFormat:
    """A Parquet format decoding ``columns`` as dictionaries (one per set of columns: a scan's
    splits share it)."""
    return ds.ParquetFileFormat(read_options=ds.ParquetReadOptions(dictionary_columns=sorted(columns)))


__all__ = [
    "BATCH_SIZE",
    "cast_array",
    "check_base_format",
    "conform_batch",
    "conform_batches",
    "file_columns_to_read",
    "leaf_paths",
    "leaves_to_read",
    "pushable_filter",
    "read_parquet",
    "row_groups_matching",
    "rows_matching",
]
