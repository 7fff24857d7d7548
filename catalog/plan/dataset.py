"""A plan's plain Parquet base files as an Arrow dataset: what a query engine scans itself.

Reading a split through :func:`catalog.read.split_reader.read_split` decodes and conforms every
column of every row on Python threads. When a planned scan is nothing but plain Parquet base files
that the reader would return unchanged, an engine (the server's DuckDB) can instead scan a
``pyarrow.dataset`` of those files itself, pushing its projection and filters into Arrow's Parquet
reader (statistics pruning, late materialization).

"Unchanged" is decided file by file, from what :func:`catalog.read.cow.read_base` and
:func:`catalog.format.parquet.read_parquet` do beyond decoding; any of these makes the answer
``None`` (read the splits):

- incremental and CDC queries (the row filter holds the commit-time filter; CDC builds rows);
- a slice with log files that a snapshot merges, a log-only slice, a Lance base file;
- schema on read (the file's columns are renamed by field id) and dropped partition columns
  (filled in from the partition path);
- a file lacking a column of the output schema, or holding it with another type (the reader
  would cast it by Hudi's rules or fill nulls);
- a table outside Arrow's native local filesystem: no Python-backed filesystem is ever handed to
  Arrow's threads (``Storage.arrow_filesystem``);
- a file whose footer cannot be read: the split reader then reports it as it always does.

The plan's filters need no care when the engine runs the whole query's condition itself: planning
with them only drops files and row groups whose rows it drops anyway. The dataset names exactly
the planned files (and row groups).

:class:`Fragments` keeps the fragments made (by file path, size and row groups: a Hudi base file
is never rewritten in place), each holding its footer once read, so a dataset made again reads no
footer; and the datasets made of them, so the same files in the same schema give the very same
dataset object, which a consumer may key what it derives from it by (the SQL engine processes'
sandbox keeps a dataset's pickled form).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pyarrow as pa
import pyarrow.dataset as ds

from catalog.lru import BoundedLRU, CacheListener, CacheStats
from catalog.plan.options import ReadOptions
from catalog.read.context import ReadContext
from catalog.table.files import Split

_PARQUET = ds.ParquetFileFormat()
#: bytes of fragments kept (each counts its footer)
FRAGMENT_CACHE_BYTES = 64 << 20
#: the share of those bytes the datasets made of kept fragments may take (a few hundred bytes each)
_DATASET_SHARE = 16
_FragmentKey = tuple[str, str, int, tuple[int, ...] | None]
_DatasetKey = tuple[bytes, tuple[_FragmentKey, ...]]


@dataclass(frozen=True)
class BaseFile:
    """A base file's fragment (its footer read), the schema of its columns as stored, and what
    it is kept by."""

    fragment: ds.ParquetFileFragment
    physical_schema: pa.Schema
    key: _FragmentKey


class Fragments:
    """Fragments of base files with their footers, and the datasets made of them, kept between
    plans (bounded LRUs: ``sql_fragments`` and ``sql_fragment_datasets``)."""

    def __init__(self, max_bytes: int = FRAGMENT_CACHE_BYTES, listener: CacheListener | None = None):
        self._kept: BoundedLRU[_FragmentKey, BaseFile] = BoundedLRU("sql_fragments", max_bytes, listener=listener)
        self._datasets: BoundedLRU[_DatasetKey, ds.FileSystemDataset] = BoundedLRU(
            "sql_fragment_datasets", max_bytes // _DATASET_SHARE, listener=listener
        )

    def stats(self) -> CacheStats:
        return self._kept.stats()

    def fragment(
        self, filesystem: pa.fs.FileSystem, path: str, size: int | None, row_groups: list[int] | None
    ) -> BaseFile | None:
        """The fragment of ``path`` (``row_groups`` of it; ``None``: all) with its footer read;
        ``None`` when the footer cannot be read (missing or damaged: the split reader reports it)."""
        key = (filesystem.type_name, path, size or -1, tuple(row_groups) if row_groups is not None else None)
        kept = self._kept.get(key)
        if kept is not None:
            return kept
        fragment = _PARQUET.make_fragment(path, filesystem=filesystem, file_size=size, row_groups=row_groups)
        try:
            fragment.ensure_complete_metadata()
            made = BaseFile(fragment, fragment.physical_schema, key)
            footer = fragment.metadata.serialized_size
        except (pa.ArrowException, OSError):
            return None
        self._kept.put(key, made, int(footer) + 1024)
        return made

    def dataset(self, files: Sequence[BaseFile], schema: pa.Schema, filesystem: pa.fs.FileSystem) -> ds.Dataset:
        """The dataset of ``files`` (each on ``filesystem``) in ``schema``: the one made before of
        the same files in the same schema (its metadata included), while it is kept."""
        key = (schema.serialize().to_pybytes(), tuple(file.key for file in files))
        made = self._datasets.get(key)
        if made is None:
            made = ds.FileSystemDataset([file.fragment for file in files], schema, _PARQUET, filesystem)
            self._datasets.put(key, made, 1024 + len(key[0]) + sum(256 + len(file.key[1]) for file in files))
        return made


def base_file_dataset(
    context: ReadContext, splits: Sequence[Split], options: ReadOptions, fragments: Fragments | None = None
) -> ds.Dataset | None:
    """A dataset of exactly the splits' base files (and row groups) in ``context.output_schema``
    when it holds the very rows and values :func:`~catalog.read.split_reader.read_split` would
    return (before ``context.row_filter``); ``None`` otherwise.

    ``fragments``: kept fragments (else each file's footer is read now)."""
    if options.incremental or options.cdc or context.cdc is not None:
        return None
    filesystem = context.storage.arrow_filesystem()
    if filesystem is None:
        return None
    schema = context.output_schema
    if len(schema) == 0:  # no column to scan: the stream carries the row counts
        return None
    kept = fragments if fragments is not None else Fragments(0)
    made = []
    for split in splits:
        base_file = _base_file(context, split, filesystem, kept)
        if base_file is None or not _same_columns(base_file.physical_schema, schema):
            return None
        made.append(base_file)
    return kept.dataset(made, schema, filesystem)


def _base_file(
    context: ReadContext, split: Split, filesystem: pa.fs.FileSystem, fragments: Fragments
) -> BaseFile | None:
    """The split's base file as a fragment, when the reader would only decode it."""
    file_slice = split.file_slice
    base = file_slice.base_file
    if base is None or file_slice.base_file_path is None or not only_decoded(context, split):
        return None
    context.storage.stats.add("open")
    return fragments.fragment(
        filesystem,
        context.storage.full_path(file_slice.base_file_path),
        base.size or None,
        list(split.row_groups) if split.row_groups else None,
    )


def only_decoded(context: ReadContext, split: Split) -> bool:
    """Whether the reader returns the split's rows as its Parquet base file stores them: no log
    to merge (a snapshot), no column renamed by schema on read, no partition column filled in, no
    bootstrap source holding the data columns beside a skeleton file."""
    file_slice = split.file_slice
    base = file_slice.base_file
    if base is None or base.extension != "parquet" or file_slice.bootstrap_source is not None:
        return False
    if file_slice.has_logs and not context.read_optimized:
        return False  # merged with its logs
    return context.column_map(base.instant) is None and context.partition_constants(file_slice.partition) is None


def _same_columns(physical: pa.Schema, schema: pa.Schema) -> bool:
    """Whether a file of this ``physical`` schema holds every column of ``schema`` with exactly its type."""
    for field in schema:
        index = physical.get_field_index(field.name)
        if index < 0 or not physical.field(index).type.equals(field.type):
            return False
    return True


__all__ = ["FRAGMENT_CACHE_BYTES", "BaseFile", "Fragments", "base_file_dataset", "only_decoded"]
