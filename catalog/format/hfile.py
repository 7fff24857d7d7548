"""HFile version 3 reader (HBase file format as written by Hudi; format doc section 5).

The metadata table stores its base files, and the content of every metadata log block, as
HFiles: sorted (row key, value) cells in data blocks, found through a (possibly multi-level)
block index. This reader supports what Hudi and the HBase versions it bundles write: GZ or
uncompressed blocks, one- or multi-level data indexes, fake (shortened) index keys, optional
per-cell MVCC and tags fields.

Reading is lazy and request-frugal: opening reads the tail of the file once (trailer, root
index, meta index and file info live there); a lookup reads only the blocks it needs; a full
scan reads the data section in large ranges. For a log block the HFile is already in memory.

Keys are compared as unsigned bytes on the *row* part of a cell key only (Hudi never writes
families, qualifiers or several versions of one row).
"""

from __future__ import annotations

import bisect
import struct
import zlib
from array import array
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

from catalog.errors import CorruptTableError, UnsupportedTableError
from catalog.format.protobuf import protobuf_fields, varint
from catalog.storage import Storage

TRAILER_SIZE = 4096
HEADER_SIZE = 33
TRAILER_MAGIC = b'TRABLK"$'
DATA_MAGIC = b"DATABLK*"
ROOT_INDEX_MAGIC = b"IDXROOT2"
INDEX_MAGICS = (b"IDXINTE2", b"IDXLEAF2")
FILE_INFO_MAGIC = b"FILEINF2"
_CODEC_GZ, _CODEC_NONE = 1, 2
_CODEC_NAMES = {0: "LZO", 1: "GZ", 2: "NONE", 3: "SNAPPY", 4: "LZ4", 5: "BZIP2", 6: "ZSTD"}
#: bytes read from the end of a stored file on open; usually covers the whole load-on-open section
_TAIL_READ = 64 * 1024
#: read-ahead when walking data blocks forward (scan) from storage
_SCAN_WINDOW = 4 * 1024 * 1024
#: read-ahead for lookups, so that walking on to the next block rarely costs a request
_LOOKUP_WINDOW = 64 * 1024
#: a cell's key length, value length and row length; then a tags length (HFile v3 with tags)
_CELL_HEAD = struct.Struct(">iiH")
_TAGS_LEN = struct.Struct(">H")
#: blocks met while walking the data section forward: data, inline index and bloom blocks
_WALKED_MAGICS = (DATA_MAGIC,) + INDEX_MAGICS + (b"BLMFBLK2",)
#: what a kept lookup block costs beyond its body and cell offsets (the Python objects)
_BLOCK_OVERHEAD = 200


def _row_key(key: str | bytes) -> bytes:
    return key.encode("utf-8") if isinstance(key, str) else bytes(key)


# -- primitive decoders ----------------------------------------------------------------------
def _hadoop_vlong(buf: bytes, pos: int) -> tuple[int, int]:
    """Hadoop ``WritableUtils`` variable-length long (not a protobuf varint)."""
    first = struct.unpack_from(">b", buf, pos)[0]
    if first >= -112:
        return first, pos + 1
    negative = first < -120
    size = (-119 - first) if negative else (-111 - first)
    if pos + size > len(buf):
        raise ValueError("truncated variable-length integer")
    raw = int.from_bytes(buf[pos + 1 : pos + size], "big")
    return (~raw if negative else raw), pos + size


def _cell_at(body: bytes, start: int) -> tuple[bytes, bytes]:
    """(row, value) of the cell at ``start`` of a data block body (checked by ``_cell_starts``)."""
    klen, vlen, rlen = _CELL_HEAD.unpack_from(body, start)
    key = start + 8
    return body[key + 2 : key + 2 + rlen], body[key + klen : key + klen + vlen]


def _row_at(body: bytes, start: int) -> bytes:
    """The row of the cell at ``start`` of a data block body."""
    rlen = body[start + 8] << 8 | body[start + 9]
    return body[start + 10 : start + 10 + rlen]


@dataclass(frozen=True)
class _IndexedBlock:
    """A data block kept for lookups: its body, where each cell starts, and where the next block is."""

    body: bytes
    starts: "array[int]"
    next_offset: int

    def bisect(self, row: bytes) -> int:
        """The index of the first cell whose row is >= ``row``."""
        body, starts = self.body, self.starts
        return bisect.bisect_left(range(len(starts)), row, key=lambda i: _row_at(body, starts[i]))


def _cell_row(key: bytes | memoryview) -> bytes:
    """The row of a cell key (2-byte length + row [+ family, qualifier, timestamp, type])."""
    (length,) = struct.unpack_from(">H", key, 0)
    if 2 + length > len(key):
        raise ValueError("row length runs past the key")
    return bytes(key[2 : 2 + length])


# -- file structure --------------------------------------------------------------------------
@dataclass(frozen=True)
class Trailer:
    """The fixed-size trailer at the end of the file (5.2)."""

    file_info_offset: int
    load_on_open_offset: int
    data_index_count: int
    meta_index_count: int
    entry_count: int
    index_levels: int
    first_data_block_offset: int
    last_data_block_offset: int
    comparator: str
    codec: int
    major: int
    minor: int


@dataclass(frozen=True)
class IndexEntry:
    """One block index entry: where a block is and the row of its first (or a fake) key."""

    offset: int
    size: int  # on-disk size including the header
    row: bytes


class HFileReader:
    """Read one HFile, from storage (``from_storage``) or from memory (``from_bytes``).

    ``read_at(offset, length)`` is the only way bytes are fetched; for stored files it goes
    through :class:`Storage` so every request is counted.
    """

    def __init__(self, read_at: Callable[[int, int], bytes], size: int, name: str):
        self._read_at = read_at
        self.size = size
        self.name = name
        self._window: tuple[int, bytes] = (0, b"")  # read-ahead buffer: (start offset, bytes)
        self._blocks: dict[int, _IndexedBlock] = {}  # lookups only
        self.cached_bytes = 0  # approximate memory of ``_blocks``
        try:
            self._open()
        except CorruptTableError:
            raise
        except (ValueError, struct.error, zlib.error, IndexError, UnicodeDecodeError) as err:
            raise CorruptTableError(f"{name}: not a readable HFile ({err})") from err

    @classmethod
    def from_bytes(cls, data: bytes, name: str = "<hfile>") -> "HFileReader":
        data = bytes(data)
        return cls(lambda off, n: data[off : off + n], len(data), name)

    @classmethod
    def from_storage(cls, storage: Storage, path: str, size: int | None = None) -> "HFileReader":
        """Open the HFile at ``path`` (relative to ``storage``); pass ``size`` to save a request."""
        if size is None:
            size = int(storage.info(path)["size"])
        name = f"{storage.uri}/{path}"
        tail_start = max(0, size - _TAIL_READ)
        tail = storage.read_range(path, tail_start, size) if size else b""

        def read_at(offset: int, length: int) -> bytes:
            if offset >= tail_start:
                return tail[offset - tail_start : offset - tail_start + length]
            return storage.read_range(path, offset, min(size, offset + length))

        return cls(read_at, size, name)

    # -- opening --------------------------------------------------------------------------
    def _open(self) -> None:
        if self.size < TRAILER_SIZE:
            raise CorruptTableError(f"{self.name}: {self.size} bytes is too short for an HFile trailer")
        raw = self._read_at(self.size - TRAILER_SIZE, TRAILER_SIZE)
        self.trailer = t = self._parse_trailer(raw)
        if not 0 <= t.load_on_open_offset <= t.file_info_offset < self.size - TRAILER_SIZE:
            raise CorruptTableError(f"{self.name}: trailer offsets point outside the file")
        if t.codec not in (_CODEC_GZ, _CODEC_NONE):
            codec = _CODEC_NAMES.get(t.codec, str(t.codec))
            raise UnsupportedTableError(f"{self.name}: HFile compression {codec} is not supported (GZ or NONE)")
        section = self._read_at(t.load_on_open_offset, self.size - TRAILER_SIZE - t.load_on_open_offset)
        pos = 0
        root, pos = self._block_in(section, pos, ROOT_INDEX_MAGIC)
        self.root_index = self._root_entries(root, t.data_index_count)
        meta, pos = self._block_in(section, pos, ROOT_INDEX_MAGIC)
        self.meta_index = {e.row: e for e in self._root_entries(meta, t.meta_index_count, raw_keys=True)}
        info_pos = t.file_info_offset - t.load_on_open_offset
        info, _ = self._block_in(section, info_pos, FILE_INFO_MAGIC)
        self.file_info = self._parse_file_info(info)
        kv_version = self.file_info.get(b"KEY_VALUE_VERSION")
        # HBase writes KEY_VALUE_VERSION=1 and a vlong memstore timestamp per cell. Hudi's native
        # writer (1.x) omits KEY_VALUE_VERSION yet still writes one 0x00 memstore byte per cell
        # (Hudi's own reader always skips exactly one byte: HFileDataBlock).
        self._has_mvcc = kv_version is not None and int.from_bytes(kv_version, "big") == 1
        self._mvcc_byte = kv_version is None
        self._has_tags = t.major >= 3 and b"hfile.MAX_TAGS_LEN" in self.file_info
        self._root_rows = [e.row for e in self.root_index]

    def _parse_trailer(self, raw: bytes) -> Trailer:
        if raw[:8] != TRAILER_MAGIC:
            raise CorruptTableError(f"{self.name}: no HFile trailer magic (truncated or not an HFile)")
        version = int.from_bytes(raw[-4:], "big")
        major, minor = version & 0x00FFFFFF, version >> 24
        if major != 3:
            raise UnsupportedTableError(f"{self.name}: HFile major version {major} is not supported (3 only)")
        length, pos = varint(raw, 8)
        if pos + length > TRAILER_SIZE - 4:
            raise CorruptTableError(f"{self.name}: trailer message length {length} runs past the trailer")
        f: dict[int, int | bytes] = dict(protobuf_fields(raw[pos : pos + length]))
        comparator = f.get(11, b"")
        return Trailer(
            file_info_offset=int(f.get(1, 0)),  # type: ignore[arg-type]
            load_on_open_offset=int(f.get(2, 0)),  # type: ignore[arg-type]
            data_index_count=int(f.get(5, 0)),  # type: ignore[arg-type]
            meta_index_count=int(f.get(6, 0)),  # type: ignore[arg-type]
            entry_count=int(f.get(7, 0)),  # type: ignore[arg-type]
            index_levels=int(f.get(8, 1)),  # type: ignore[arg-type]
            first_data_block_offset=int(f.get(9, 0)),  # type: ignore[arg-type]
            last_data_block_offset=int(f.get(10, 0)),  # type: ignore[arg-type]
            comparator=comparator.decode("utf-8") if isinstance(comparator, bytes) else "",
            codec=int(f.get(12, _CODEC_NONE)),  # type: ignore[arg-type]
            major=major,
            minor=minor,
        )

    def _block_in(self, buf: bytes, pos: int, magic: bytes | tuple[bytes, ...]) -> tuple[bytes, int]:
        """Decode the block starting at ``buf[pos]``; return (uncompressed body, position after it)."""
        if len(buf) - pos < HEADER_SIZE:
            raise CorruptTableError(f"{self.name}: block header truncated")
        found = bytes(buf[pos : pos + 8])
        wanted = (magic,) if isinstance(magic, bytes) else magic
        if found not in wanted:
            raise CorruptTableError(f"{self.name}: expected block {wanted[0]!r}, found {found!r}")
        on_disk, uncompressed, _prev, _ck_type, _per_ck, data_with_header = struct.unpack_from(
            ">iiqBii", buf, pos + 8
        )
        end = pos + HEADER_SIZE + on_disk
        if on_disk < 0 or data_with_header < HEADER_SIZE or pos + data_with_header > len(buf) or end > len(buf):
            raise CorruptTableError(f"{self.name}: block {found!r} runs past the available bytes")
        body = bytes(buf[pos + HEADER_SIZE : pos + data_with_header])
        if self.trailer.codec == _CODEC_GZ:
            body = zlib.decompress(body, 16 + zlib.MAX_WBITS)
        if len(body) != uncompressed:
            raise CorruptTableError(f"{self.name}: block {found!r} has {len(body)} bytes, header says {uncompressed}")
        return body, end

    def _root_entries(self, body: bytes, count: int, raw_keys: bool = False) -> list[IndexEntry]:
        out = []
        pos = 0
        for _ in range(count):
            offset, size = struct.unpack_from(">qi", body, pos)
            length, pos = _hadoop_vlong(body, pos + 12)
            if length < 0 or pos + length > len(body):
                raise CorruptTableError(f"{self.name}: index key runs past the index block")
            key = body[pos : pos + length]
            pos += length
            out.append(IndexEntry(offset, size, bytes(key) if raw_keys else _cell_row(key)))
        return out

    def _non_root_entries(self, body: bytes) -> list[IndexEntry]:
        (count,) = struct.unpack_from(">i", body, 0)
        offsets = struct.unpack_from(f">{count + 1}i", body, 4)
        base = 4 + 4 * (count + 1)
        out = []
        for i in range(count):
            start = base + offsets[i]
            offset, size = struct.unpack_from(">qi", body, start)
            out.append(IndexEntry(offset, size, _cell_row(body[start + 12 : base + offsets[i + 1]])))
        return out

    def _parse_file_info(self, body: bytes) -> dict[bytes, bytes]:
        if body[:4] != b"PBUF":
            raise CorruptTableError(f"{self.name}: file info block lacks its PBUF prefix")
        length, pos = varint(body, 4)
        info: dict[bytes, bytes] = {}
        for number, pair in protobuf_fields(body[pos : pos + length]):
            if number == 1 and isinstance(pair, bytes):
                fields = dict(protobuf_fields(pair))
                info[bytes(fields.get(1, b""))] = bytes(fields.get(2, b""))  # type: ignore[arg-type]
        return info

    # -- block access ---------------------------------------------------------------------
    def _fetch(self, offset: int, length: int, read_ahead: int) -> bytes:
        start, window = self._window
        if start <= offset and offset + length <= start + len(window):
            return window[offset - start : offset - start + length]
        limit = self.trailer.load_on_open_offset
        want = min(max(length, read_ahead), max(length, limit - offset))
        window = self._read_at(offset, want)
        self._window = (offset, window)
        if len(window) < length:
            raise CorruptTableError(f"{self.name}: block at {offset} is truncated")
        return window[:length]

    def _block_at(self, offset: int, size: int | None, magic, read_ahead: int = 0) -> tuple[bytes, bytes, int]:
        """(magic, body, on-disk size) of the block at ``offset``; ``size`` may be unknown."""
        header = self._fetch(offset, size or HEADER_SIZE, max(read_ahead, size or HEADER_SIZE))
        (on_disk,) = struct.unpack_from(">i", header, 8)
        full = HEADER_SIZE + on_disk
        raw = header if len(header) >= full else self._fetch(offset, full, read_ahead)
        try:
            body, _ = self._block_in(raw, 0, magic)
        except (ValueError, struct.error, zlib.error) as err:
            raise CorruptTableError(f"{self.name}: block at offset {offset} does not decode ({err})") from err
        return bytes(raw[:8]), body, full

    def _cell_starts(self, body: bytes) -> list[int]:
        """The offset of every cell of a data block body (5.6), each checked to fit the block.

        The hot loop of a first lookup in a block (every cell of the block is walked): names are
        bound once, each cell's fixed head is unpacked in one call, and nothing but the offset
        is kept (no object per cell for the garbage collector to walk).
        """
        out: list[int] = []
        append = out.append
        head = _CELL_HEAD.unpack_from
        tags, mvcc, mvcc_byte = self._has_tags, self._has_mvcc, self._mvcc_byte
        pos, end = 0, len(body)
        try:
            while pos < end:
                klen, vlen, rlen = head(body, pos)
                key = pos + 8
                stop = key + klen + vlen
                if klen < rlen + 2 or vlen < 0 or stop > end:
                    raise CorruptTableError(f"{self.name}: cell at {key} runs past its data block")
                append(pos)
                pos = stop
                if tags:
                    (tlen,) = _TAGS_LEN.unpack_from(body, pos)
                    pos += 2 + tlen
                if mvcc:
                    if pos < end and (body[pos] < 0x80 or body[pos] >= 0x90):  # one byte: -112..127
                        pos += 1
                    else:
                        _, pos = _hadoop_vlong(body, pos)
                elif mvcc_byte:
                    if pos >= end or body[pos] != 0:
                        raise CorruptTableError(f"{self.name}: cell before {pos} lacks its 0x00 memstore byte")
                    pos += 1
        except struct.error as err:
            raise CorruptTableError(f"{self.name}: data block truncated ({err})") from err
        return out

    def _cells(self, body: bytes) -> list[tuple[bytes, bytes]]:
        """(row, value) of every cell of a data block body (5.6)."""
        return [_cell_at(body, start) for start in self._cell_starts(body)]

    def _data_cells(self, offset: int, size: int | None, read_ahead: int) -> tuple[list[tuple[bytes, bytes]], int]:
        """Cells of the data block at ``offset`` and the offset of the next block (a scan: not kept).

        Non-data blocks met while walking forward (HBase inline leaf-index or bloom blocks)
        come back as empty cell lists.
        """
        magic, body, full = self._block_at(offset, size, _WALKED_MAGICS, read_ahead)
        return (self._cells(body) if magic == DATA_MAGIC else [], offset + full)

    def _indexed_block(self, offset: int, size: int | None, read_ahead: int) -> _IndexedBlock:
        """The data block at ``offset`` with its cell offsets, kept for the next lookup (several
        keys may share one block; a non-data block is kept with no cells)."""
        cached = self._blocks.get(offset)
        if cached is not None:
            return cached
        magic, body, full = self._block_at(offset, size, _WALKED_MAGICS, read_ahead)
        if magic != DATA_MAGIC:
            body = b""
        block = _IndexedBlock(body, array("i", self._cell_starts(body)), offset + full)
        self._blocks[offset] = block
        self.cached_bytes += len(body) + block.starts.itemsize * len(block.starts) + _BLOCK_OVERHEAD
        return block

    # -- index walking --------------------------------------------------------------------
    def _start_block(self, row: bytes) -> IndexEntry | None:
        """The data block where cells with ``row`` (or rows after it) may start.

        That is the last block whose index row is strictly below ``row``: with non-unique or
        fake index keys, equal rows may begin in the previous block.
        """
        entries = self.root_index
        rows = self._root_rows
        for _level in range(max(1, self.trailer.index_levels)):
            if not entries:
                return None
            pos = max(bisect.bisect_left(rows, row) - 1, 0)
            entry = entries[pos]
            if _level == self.trailer.index_levels - 1:
                return entry
            _, body, _ = self._block_at(entry.offset, entry.size, INDEX_MAGICS)
            entries = self._non_root_entries(body)
            rows = [e.row for e in entries]
        return None

    def _cells_from(self, offset: int, size: int | None, read_ahead: int) -> Iterator[tuple[bytes, bytes]]:
        """Cells from the data block at ``offset`` to the end of the data section (a scan)."""
        last = self.trailer.last_data_block_offset
        while offset < self.trailer.load_on_open_offset:
            cells, nxt = self._data_cells(offset, size, read_ahead)
            yield from cells
            if offset >= last:
                return
            offset, size = nxt, None

    def _cells_looked_up(self, offset: int, size: int | None, row: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Cells from the first one whose row is >= ``row`` (cells are sorted: bisected), starting
        in the data block at ``offset``, to the end of the data section; blocks are kept."""
        last = self.trailer.last_data_block_offset
        while offset < self.trailer.load_on_open_offset:
            block = self._indexed_block(offset, size, _LOOKUP_WINDOW)
            start = block.bisect(row) if row else 0
            if start < len(block.starts):
                row = b""
            for index in range(start, len(block.starts)):
                yield _cell_at(block.body, block.starts[index])
            if offset >= last:
                return
            offset, size = block.next_offset, None

    # -- public API -----------------------------------------------------------------------
    @property
    def entry_count(self) -> int:
        return self.trailer.entry_count

    def info(self, key: str) -> bytes | None:
        """A file-info value (``schema``, ``hfile.LASTKEY``, ``minRecordKey``, ...)."""
        return self.file_info.get(key.encode())

    @property
    def avro_schema(self) -> str | None:
        value = self.info("schema")
        return value.decode("utf-8") if value is not None else None

    def meta_block(self, name: str) -> bytes | None:
        """The body of a named meta block (e.g. ``bloomFilter``), or ``None``."""
        entry = self.meta_index.get(name.encode())
        if entry is None:
            return None
        _, body, _ = self._block_at(entry.offset, entry.size, b"METABLKc")
        return body

    def scan(self) -> Iterator[tuple[bytes, bytes]]:
        """Every (row, value) in key order."""
        if self.entry_count == 0 or not self.root_index:
            return
        yield from self._cells_from(self.trailer.first_data_block_offset, None, _SCAN_WINDOW)

    def seek(self, key: str | bytes) -> Iterator[tuple[bytes, bytes]]:
        """The cells whose row equals ``key`` (several when keys are not unique)."""
        row = _row_key(key)
        for cell_row, value in self._from(row):
            if cell_row != row:
                return
            yield cell_row, value

    def get(self, key: str | bytes) -> bytes | None:
        """The value of the first cell with row ``key``, or ``None``."""
        for _, value in self.seek(key):
            return value
        return None

    def seek_prefix(self, prefix: str | bytes) -> Iterator[tuple[bytes, bytes]]:
        """The cells whose row starts with ``prefix``, in key order."""
        start = _row_key(prefix)
        for cell_row, value in self._from(start):
            if not cell_row.startswith(start):
                return
            yield cell_row, value

    def lookup(self, keys: Sequence[str | bytes]) -> Iterator[tuple[bytes, bytes]]:
        """Cells of every key of ``keys`` found in the file, in key order; each block is read once."""
        for row in sorted(set(map(_row_key, keys))):
            yield from self.seek(row)

    def lookup_prefixes(self, prefixes: Sequence[str | bytes]) -> Iterator[tuple[bytes, bytes]]:
        """Cells whose row starts with any of ``prefixes``, in key order, without duplicates."""
        done = b""
        for prefix in sorted(set(map(_row_key, prefixes))):
            if done and prefix.startswith(done):
                continue  # a shorter prefix already covered it
            yield from self.seek_prefix(prefix)
            done = prefix

    def _from(self, row: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Cells with rows >= ``row``, in order (reads blocks lazily)."""
        if self.entry_count == 0:
            return
        last = self.info("hfile.LASTKEY")
        if last is not None and _cell_row(last) < row:
            return
        entry = self._start_block(row)
        if entry is None:
            return
        yield from self._cells_looked_up(entry.offset, entry.size, row)


__all__ = ["HFileReader", "IndexEntry", "Trailer"]
