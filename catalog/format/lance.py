"""Lance base files (Hudi 1.2, ``hoodie.table.base.file.format=LANCE``) -> batches in the table schema.

Decoding needs pylance (the ``lance`` extra); without it reading such a file raises
:class:`~catalog.errors.MissingExtraError` naming the extra. pylance reads through its own
object store, which would bypass fsspec (and with it a caller-registered filesystem, the request
counters and the retries), so a file reaches it one of two ways:

* a table on the local filesystem (exactly fsspec's ``LocalFileSystem``, the case where Parquet
  is scanned by Arrow's native filesystem) is opened in place;
* on every other filesystem the bytes a read needs (the file's metadata, then the pages of the
  columns read) are fetched through :class:`~catalog.storage.Storage` (counted, retried) into a
  private temporary file that pylance decodes and that is removed when the read ends
  (:mod:`catalog.format.lance_fetch`).

Lance files carry no row-group statistics that pylance exposes for skipping, so the row filter is
applied to the decoded batches. A Lance file is never cut into byte ranges: one split per file.

:func:`read_lance_footer` reads the row count from the file's own metadata with three small
ranged requests (no pylance needed), for the split planner's estimates. Layout of a Lance v2
file (format versions 2.0 and 2.1): data pages, global buffers, column metadata, the column
metadata and global buffer offset tables, then a 40-byte footer ending in ``LANC``; global
buffer 0 is the ``FileDescriptor`` protobuf (field 1 the schema, field 2 the row count).
"""

from __future__ import annotations

import contextlib
import os
import re
import struct
from dataclasses import dataclass
from types import ModuleType
from typing import Iterable, Iterator, Mapping

import pyarrow as pa
from fsspec.implementations.local import LocalFileSystem

from catalog.errors import CorruptTableError, HudiError, MissingExtraError
from catalog.format.base_file import BaseFileRead
from catalog.format.lance_blob import as_descriptors, blob_columns, blob_descriptors
from catalog.format.lance_fetch import FetchedCopy, parse_footer
from catalog.format.parquet import BATCH_SIZE, conform_batches, file_columns_to_read
from catalog.format.protobuf import protobuf_fields, varint
from catalog.storage import Storage

_VARINT_MAX = 10
#: the ", /path/to/src/file.rs:12:34" pylance appends to its messages
_RUST_LOCATION = re.compile(r",?\s*\S*\.rs:\d+:\d+")


def lance_file_module() -> ModuleType:
    """pylance's ``lance.file`` module, or :class:`MissingExtraError` naming the ``lance`` extra."""
    try:
        import lance.file
    except ImportError as err:
        raise MissingExtraError("reading Lance base files", "lance") from err
    return lance.file


@dataclass(frozen=True)
class LanceFooter:
    """What the planner needs of a Lance file, read from its footer and file descriptor."""

    num_rows: int
    num_columns: int
    version: tuple[int, int]


def _descriptor_rows(buf: bytes) -> int | None:
    """The row count (field 2) of a serialized ``FileDescriptor`` (or of its part from the row
    count on); ``None`` when ``buf`` holds no field 2."""
    for number, value in protobuf_fields(buf):
        if number == 2 and isinstance(value, int):
            return value
    return None


def read_lance_footer(storage: Storage, path: str, size: int) -> LanceFooter:
    """The row count and layout facts of the Lance file ``path`` of ``size`` bytes.

    Three ranged reads: the footer with the offset tables, the first bytes of the file
    descriptor (the length of its schema), then the few bytes after the schema (the row count);
    the whole descriptor only if a writer put the row count first.
    """
    where = f"{storage.uri}/{path}"
    try:
        if not size:
            size = int(storage.info(path)["size"])
        tail_start = max(0, size - 4096)
        tail = storage.read_range(path, tail_start, size)
        footer = parse_footer(tail)
        gbo_start, n_buffers = footer.global_buffers_table, footer.n_global_buffers
        if n_buffers < 1 or gbo_start + 16 > size:
            raise ValueError("no file descriptor")
        if gbo_start >= tail_start:
            gbo = tail[gbo_start - tail_start:gbo_start - tail_start + 16]
        else:
            gbo = storage.read_range(path, gbo_start, gbo_start + 16)
        desc_pos, desc_len = struct.unpack("<QQ", gbo)
        if desc_pos + desc_len > size:
            raise ValueError("file descriptor past the end of the file")
        head = storage.read_range(path, desc_pos, desc_pos + min(desc_len, 2 * _VARINT_MAX))
        key, pos = varint(head, 0)
        rows = None
        if key == (1 << 3 | 2):  # the schema first, as Lance writes it: skip it
            length, pos = varint(head, pos)
            after = desc_pos + pos + length
            rows = _descriptor_rows(storage.read_range(path, after, min(desc_pos + desc_len, after + 2 * _VARINT_MAX)))
        if rows is None:
            rows = _descriptor_rows(storage.read_range(path, desc_pos, desc_pos + desc_len))
        if rows is None:
            raise ValueError("file descriptor without a row count")
    except FileNotFoundError as err:  # e.g. cleaned after the slices were listed
        raise FileNotFoundError(f"base file missing: {where}") from err
    except (ValueError, struct.error) as err:
        raise CorruptTableError(f"cannot read Lance base file {where}: {err}") from err
    return LanceFooter(rows, footer.n_columns, footer.version)


@contextlib.contextmanager
def _local_file(storage: Storage, path: str, size: int | None) -> Iterator[FetchedCopy | None]:
    """``None`` on a local table (pylance opens the file itself), else a :class:`FetchedCopy`
    fetched through fsspec (removed on exit)."""
    if type(storage.fs) is LocalFileSystem:  # exactly fsspec's own: a registered subclass stays on fsspec
        storage.stats.add("open")
        yield None
        return
    copy = FetchedCopy(storage, path, size or int(storage.info(path)["size"]))
    try:
        yield copy
    finally:
        copy.remove()


def read_lance(storage: Storage, file: BaseFileRead, batch_size: int = BATCH_SIZE) -> Iterator[pa.RecordBatch]:
    """Stream the rows of one Lance base file as batches of ``file.schema``.

    The fields of ``file`` mean what they mean for :func:`catalog.format.parquet.read_parquet`
    (a Lance file has no row groups); the filter is always applied to the decoded batches.
    """
    if file.row_groups is not None:  # the planner never cuts a Lance file
        raise ValueError("a Lance base file has no row groups")
    lance_file = lance_file_module()
    path, schema, constants = file.path, file.schema, file.constants
    where = f"{storage.uri}/{path}"
    local = path
    try:
        with _local_file(storage, path, file.size) as copy:
            local = copy.path if copy is not None else storage.full_path(path)
            metadata = lance_file.LanceFileReader(local).metadata()
            physical = metadata.schema
            columns, rename = file_columns_to_read(schema, physical, file.source_names, constants)
            if copy is not None:
                copy.complete(metadata, columns or physical.names[:1])
            # No column to read (a count, or only absent columns): read the first one for the row count.
            reader = lance_file.LanceFileReader(local, columns=columns or physical.names[:1])
            batches = reader.read_all(batch_size=batch_size).to_batches()
            if not columns:
                batches = (b.select([]) for b in batches)
            blobs = {n: blob_descriptors(local, metadata, n) for n in blob_columns(physical) if n in columns}
            if blobs:
                batches = _blob_descriptor_batches(batches, blobs, _external_path(storage, path))
            yield from conform_batches(batches, schema, constants=constants, filter=file.filter, rename=rename,
                                       adapt=file.adapt)
    except (HudiError, ConnectionError, TimeoutError):
        raise  # storage trouble or a cast the table schema refuses, not a damaged file
    except FileNotFoundError as err:  # e.g. cleaned after the plan was made
        raise FileNotFoundError(f"base file missing: {where}") from err
    except (OSError, ValueError, RuntimeError) as err:
        message = _public_message(err, local, path)
        if message.startswith("Not found"):  # pylance's word for a missing file
            raise FileNotFoundError(f"base file missing: {where}") from err
        raise CorruptTableError(f"cannot decode Lance base file {where}: {message}") from err


def _external_path(storage: Storage, path: str) -> str:
    """The base file as a BLOB descriptor names it: Hadoop's ``file:/...`` on local storage."""
    full = storage.full_path(path)
    if isinstance(storage.fs, LocalFileSystem):
        return f"file:{os.path.abspath(full)}"
    return storage.fs.unstrip_protocol(full)


def _blob_descriptor_batches(
    batches: Iterable[pa.RecordBatch], blobs: Mapping[str, pa.FixedSizeListArray], external_path: str
) -> Iterator[pa.RecordBatch]:
    """``batches`` (in file row order) with each BLOB column in descriptor mode."""
    row = 0
    for batch in batches:
        for name, pairs in blobs.items():
            i = batch.schema.get_field_index(name)
            column = as_descriptors(batch.column(i), pairs[row:row + batch.num_rows], external_path)
            batch = batch.set_column(i, batch.schema.field(i).with_type(column.type), column)
        row += batch.num_rows
        yield batch


def _public_message(err: Exception, local: str, path: str) -> str:
    """pylance's message without the machine's paths: the local file becomes the table-relative
    ``path`` and the Rust source location it appends is dropped."""
    return _RUST_LOCATION.sub("", str(err).replace(local, path)).strip()

__all__ = ["LanceFooter", "lance_file_module", "read_lance", "read_lance_footer"]
