"""Column chunks, not files: the byte ranges a Parquet read needs, coalesced and fetched at once.

Over an object store a file object with read-ahead (fsspec's default; s3fs reads ahead 50 MiB)
fetches whole files for a projection of a few columns. Here the footer comes with one ranged
read of the file's tail (the file size is known from the listing: no HEAD), the byte ranges of
the column chunks to decode are computed from it, ranges closer than ``HOLE_BYTES`` are merged
(up to ``RANGE_BYTES`` each: pyarrow's ``CacheOptions`` defaults) and all are fetched with one
:meth:`~catalog.storage.Storage.read_ranges` call (concurrent on async filesystems such as
s3fs). pyarrow then decodes from a :class:`SparseFile` on the calling thread: no Arrow thread
ever calls back into Python (see ``catalog.format.parquet``).

A read outside the fetched ranges (a writer whose chunk offsets are off, a page index) is
fetched from storage there and then, so a wrong range costs a request, never a wrong answer.
A file shorter than its listed size (rewritten under the same name since it was listed) fails
as a :class:`~catalog.errors.CorruptTableError` naming it instead of decoding mixed bytes.
"""

from __future__ import annotations

import bisect
import io
import threading
from typing import Callable, Iterable, Protocol, Sequence

import pyarrow.parquet as pq

from catalog.errors import CorruptTableError
from catalog.storage import Storage

#: ranges at most this far apart are fetched as one (a request costs more than the hole's bytes)
HOLE_BYTES = 8 << 10
#: no coalesced range grows beyond this (larger ones are fetched concurrently)
RANGE_BYTES = 32 << 20
#: the tail read for the footer (Arrow's own first footer read is this size)
FOOTER_GUESS = 64 << 10
#: the column-chunk bytes a read fetches at once (the next window's are fetched while this one
#: is decoded: at most two windows are held)
WINDOW_BYTES = 64 << 20


class FooterSource(Protocol):
    """Where a read takes a base file's footer from when it has one (the planner's footer cache:
    planning read it already)."""

    def footer(self, storage: Storage, rel_path: str, size: int) -> pq.FileMetaData: ...


def coalesce(
    ranges: Iterable[tuple[int, int]], hole: int = HOLE_BYTES, limit: int = RANGE_BYTES
) -> list[tuple[int, int]]:
    """``[start, end)`` ranges sorted and merged where at most ``hole`` bytes apart (overlapping
    ones always), no merged range growing beyond ``limit`` bytes."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(r for r in ranges if r[1] > r[0]):
        if out:
            first, last = out[-1]
            if start <= last or (start - last <= hole and max(end, last) - first <= limit):
                out[-1] = (first, max(end, last))
                continue
        out.append((start, end))
    return out


def chunk_ranges(metadata: pq.FileMetaData, row_groups: Sequence[int], columns: Sequence[str]) -> list[tuple[int, int]]:
    """The byte ranges of the column chunks of ``columns`` (top-level names; a nested column's
    leaves are named by their dotted path) in ``row_groups``: dictionary page through data pages."""
    wanted = set(columns)
    leaves = [
        j for j in range(metadata.num_columns)
        if _top_level(metadata.schema.column(j).path, wanted)
    ]
    out = []
    for g in row_groups:
        group = metadata.row_group(g)
        for j in leaves:
            chunk = group.column(j)
            start = chunk.data_page_offset
            dictionary = chunk.dictionary_page_offset
            if chunk.has_dictionary_page and dictionary:  # 0: an old writer's "none"
                start = min(start, dictionary)
            out.append((int(start), int(start + chunk.total_compressed_size)))
    return out


def _top_level(path: str, wanted: set[str]) -> bool:
    """Whether the leaf at dotted ``path`` belongs to one of the top-level columns ``wanted``."""
    if path in wanted:
        return True
    dot = path.find(".")
    while dot >= 0:
        if path[:dot] in wanted:
            return True
        dot = path.find(".", dot + 1)
    return False


class SparseFile(io.RawIOBase):
    """A read-only file of known ``size`` of which some byte ranges are held in memory.

    A read the held ranges do not cover is made by ``fetch(start, end)`` (and counted in
    ``misses``); Arrow reads it on the calling thread only.
    """

    def __init__(self, size: int, fetch: Callable[[int, int], bytes], name: str = ""):
        super().__init__()
        self.size = size
        self.name = name
        self.misses = 0
        self._fetch = fetch
        self._starts: list[int] = []
        self._pieces: list[bytes] = []
        self._lock = threading.Lock()  # the next row groups' ranges arrive from a prefetch thread
        self._pos = 0

    def hold(self, start: int, data: bytes, end: int) -> None:
        """Keep ``data``, the bytes ``[start, end)`` (fewer: the file changed since it was listed)."""
        if len(data) != end - start:
            raise CorruptTableError(
                f"Parquet base file {self.name} returned {len(data)} bytes for [{start}, {end}) of its "
                f"listed {self.size}: it changed since it was listed"
            )
        with self._lock:
            at = bisect.bisect_left(self._starts, start)
            self._starts.insert(at, start)
            self._pieces.insert(at, data)

    def release(self, ranges: Iterable[tuple[int, int]]) -> None:
        """Drop the held ``ranges`` (as fetched: their row groups are decoded)."""
        with self._lock:
            for start, _ in ranges:
                at = bisect.bisect_left(self._starts, start)
                if at < len(self._starts) and self._starts[at] == start:
                    del self._starts[at], self._pieces[at]

    # -- the file object Arrow reads ---------------------------------------------------------
    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def read(self, n: int | None = -1) -> bytes:
        start = self._pos
        end = self.size if n is None or n < 0 else min(self.size, start + n)
        if end <= start:
            return b""
        self._pos = end
        with self._lock:
            at = bisect.bisect_right(self._starts, start) - 1
            if at >= 0 and self._starts[at] + len(self._pieces[at]) >= end:
                offset = start - self._starts[at]
                return self._pieces[at][offset : offset + end - start]
        self.misses += 1
        data = self._fetch(start, end)
        if len(data) != end - start:
            self.hold(start, data, end)  # raises: the file is shorter than listed
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def fetch_ranges(storage: Storage, path: str, file: SparseFile, ranges: Sequence[tuple[int, int]]) -> None:
    """Fetch ``ranges`` of ``path`` with one ``read_ranges`` call and hold them in ``file``."""
    if not ranges:
        return
    starts = [s for s, _ in ranges]
    ends: list[int | None] = [e for _, e in ranges]
    for (start, end), data in zip(ranges, storage.read_ranges([path] * len(ranges), starts, ends)):
        file.hold(start, data, end)


def fetch_chunks(
    storage: Storage, path: str, file: SparseFile, metadata: pq.FileMetaData,
    row_groups: Sequence[int], columns: Sequence[str],
) -> list[tuple[int, int]]:
    """Fetch the column chunks of ``columns`` in ``row_groups`` of ``path``, coalesced, into
    ``file``; returns the ranges fetched (to release them once decoded)."""
    ranges = coalesce(chunk_ranges(metadata, row_groups, columns))
    fetch_ranges(storage, path, file, ranges)
    return ranges


def sparse_file(storage: Storage, path: str, size: int | None) -> SparseFile:
    """An empty :class:`SparseFile` of ``path`` reading through ``storage``; ``size`` ``None``
    (not listed) costs one ``info`` request."""
    if size is None:
        size = int(storage.info(path)["size"])
    return SparseFile(size, lambda start, end: storage.read_range(path, start, end), name=f"{storage.uri}/{path}")


def open_sparse(storage: Storage, path: str, size: int | None) -> SparseFile:
    """A :class:`SparseFile` of ``path`` holding its tail: the footer and what precedes it (one
    request; a footer larger than ``FOOTER_GUESS`` costs one more, when Arrow reads it)."""
    file = sparse_file(storage, path, size)
    fetch_ranges(storage, path, file, [(max(0, file.size - FOOTER_GUESS), file.size)])
    return file


def read_footer(storage: Storage, path: str, size: int | None) -> pq.FileMetaData:
    """The footer of the Parquet file ``path`` of ``size`` bytes, from one ranged read of its tail."""
    return pq.read_metadata(open_sparse(storage, path, size))


def windows(metadata: pq.FileMetaData, row_groups: Sequence[int], columns: Sequence[str]) -> list[list[int]]:
    """``row_groups`` in consecutive runs whose column chunks of ``columns`` are together at most
    ``WINDOW_BYTES`` (a larger row group is a run of its own): what one fetch holds in memory."""
    out: list[list[int]] = []
    held = 0
    for g in row_groups:
        size = sum(end - start for start, end in chunk_ranges(metadata, [g], columns))
        if out and held + size <= WINDOW_BYTES:
            out[-1].append(g)
            held += size
        else:
            out.append([g])
            held = size
    return out


__all__ = [
    "FOOTER_GUESS",
    "HOLE_BYTES",
    "RANGE_BYTES",
    "WINDOW_BYTES",
    "FooterSource",
    "SparseFile",
    "chunk_ranges",
    "coalesce",
    "fetch_chunks",
    "fetch_ranges",
    "open_sparse",
    "read_footer",
    "sparse_file",
    "windows",
]
