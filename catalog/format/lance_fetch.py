"""A local file pylance can open, holding a Lance base file's bytes fetched through fsspec.

pylance reads only through its own object store, so on any filesystem but the local one the
file is copied, through :class:`~catalog.storage.Storage` (counted, retried), into a private
temporary file that is removed afterwards. The copy holds only what a read needs: first the
file's tail (global buffers, column metadata, offset tables, footer), enough for pylance to
open it; then, once the columns to read are known, the pages of those columns (ranges closer
than ``COALESCE_BYTES`` fetched as one). Holes stay zeros and are never read.

A projection is fetched page by page only where the layout is known exactly: Lance file format
2.0 (one column per field, depth first; checked against the file's column count) and no BLOB
column among those read (pylance fetches blob bytes from wherever the descriptors point). In
every other case the whole file is fetched.
"""

from __future__ import annotations

import os
import struct
import tempfile
from dataclasses import dataclass
from typing import Any, Sequence

from catalog.format.lance_blob import blob_columns, field_columns
from catalog.storage import Storage

COPY_CHUNK_BYTES = 16 << 20
COALESCE_BYTES = 1 << 20
TAIL_BYTES = 64 << 10
MAGIC = b"LANC"
#: column meta start, CMO table, GBO table, #global buffers, #columns, major, minor, magic
FOOTER = struct.Struct("<QQQIIHH4s")
_PAGED_VERSIONS = {(0, 3)}  # Lance file format 2.0


@dataclass(frozen=True)
class Footer:
    column_meta_start: int
    global_buffers_table: int
    n_global_buffers: int
    n_columns: int
    version: tuple[int, int]


def parse_footer(data: bytes) -> Footer:
    """The 40-byte footer at the end of ``data`` (``ValueError`` if it is not a Lance footer)."""
    if len(data) < FOOTER.size:
        raise ValueError("shorter than a Lance footer")
    cms, _, gbo, n_buffers, n_columns, major, minor, magic = FOOTER.unpack(data[-FOOTER.size:])
    if magic != MAGIC:
        raise ValueError("no Lance magic at the end")
    return Footer(cms, gbo, n_buffers, n_columns, (major, minor))


def _merged(spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """(start, end) ranges, sorted, those closer than ``COALESCE_BYTES`` merged."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start - out[-1][1] <= COALESCE_BYTES:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


class FetchedCopy:
    """A temporary local copy of the Lance file ``path``: :attr:`path` opens in pylance once
    built; :meth:`complete` fetches what reading ``columns`` needs. :meth:`remove` deletes it."""

    def __init__(self, storage: Storage, path: str, size: int):
        self.storage, self.rel, self.size = storage, path, size
        fd, self.path = tempfile.mkstemp(prefix="hudi-lance-", suffix=".lance")
        try:
            with os.fdopen(fd, "wb") as out:
                out.truncate(size)
            self.tail_start = self._fetch_tail()
        except BaseException:
            self.remove()
            raise

    def _write(self, start: int, data: bytes) -> None:
        with open(self.path, "r+b") as out:
            out.seek(start)
            out.write(data)

    def _fetch_tail(self) -> int:
        chunk_start = max(0, self.size - TAIL_BYTES)
        tail = self.storage.read_range(self.rel, chunk_start, self.size)
        footer = parse_footer(tail)
        table_end = footer.global_buffers_table + 16 * footer.n_global_buffers
        if not chunk_start <= footer.global_buffers_table <= table_end <= self.size:
            table = self.storage.read_range(self.rel, footer.global_buffers_table, table_end)
        else:
            table = tail[footer.global_buffers_table - chunk_start:table_end - chunk_start]
        positions = [struct.unpack_from("<Q", table, 16 * i)[0] for i in range(footer.n_global_buffers)]
        start = min([footer.column_meta_start, *positions])
        if not 0 <= start <= self.size:
            raise ValueError("metadata offsets past the end of the file")
        if start < chunk_start:
            self._write(start, self.storage.read_range(self.rel, start, chunk_start))
        self._write(chunk_start, tail)
        self.version = footer.version
        return min(start, chunk_start)

    def complete(self, metadata: Any, columns: Sequence[str]) -> None:
        """Fetch the pages of ``columns`` (pylance's ``LanceFileMetadata`` of this file), or the
        whole file where the layout is not known exactly."""
        spans = self._column_spans(metadata, columns)
        if spans is None:
            spans = [(start, min(self.tail_start, start + COPY_CHUNK_BYTES))
                     for start in range(0, self.tail_start, COPY_CHUNK_BYTES)]
        else:
            spans = _merged([(s, e) for s, e in spans if s < self.tail_start])
        for start, end in spans:
            self._write(start, self.storage.read_range(self.rel, start, min(end, self.tail_start)))

    def _column_spans(self, metadata: Any, columns: Sequence[str]) -> list[tuple[int, int]] | None:
        if self.version not in _PAGED_VERSIONS or set(columns) & set(blob_columns(metadata.schema)):
            return None
        try:
            ranges = field_columns(metadata.schema, len(metadata.columns))
        except ValueError:
            return None
        spans = []
        for name in columns:
            for index in ranges[name]:
                column = metadata.columns[index]
                buffers = [*column.column_buffers, *(b for page in column.pages for b in page.buffers)]
                spans += [(b.position, b.position + b.size) for b in buffers if b.size]
        return spans

    def remove(self) -> None:
        os.unlink(self.path)


__all__ = ["COALESCE_BYTES", "FetchedCopy", "Footer", "parse_footer"]
