"""Hudi log file block framing (format doc sections 4.1-4.3 and 4.5).

A log file is a sequence of blocks::

    #HUDI# | blockSize:int64 | version:int32 | type:int32 | header map | contentLength:int64
           | content | footer map | reversePointer:int64

``blockSize`` counts the bytes after itself up to the end of the block; the reverse pointer
equals ``blockSize + 6``. Maps are ``count:int32`` then ``(key ordinal:int32, len:int32,
utf-8 value)`` entries.

Corrupt blocks (a crash mid-write, a truncated upload) are detected the way Hudi detects them:
the declared size must stay inside the file, the trailing length must repeat it, and the next
bytes must be a magic or the end of the file. A corrupt block is skipped up to the next magic
with a :class:`CorruptBlockWarning` naming the file and offset. A block that passes these checks
but cannot be parsed (unknown type, inconsistent inner lengths) raises :class:`CorruptTableError`,
as does a file whose first bytes are not a magic.

This module only frames blocks; decoding content is :mod:`catalog.format.log_block` (data, delete,
command) and the metadata-table reader (HFILE_DATA).
"""

from __future__ import annotations

import enum
import io
import struct
import threading
import warnings
from dataclasses import dataclass, field
from typing import BinaryIO, ContextManager, Iterable, Iterator, Sequence

from catalog.errors import CorruptBlockWarning, CorruptTableError, UnsupportedTableError
from catalog.storage import Storage

MAGIC = b"#HUDI#"
LOG_FORMAT_VERSION = 1
_SIZE_FIELD = 8
_SCAN_CHUNK = 1 << 16


class BlockType(enum.IntEnum):
    """Block type ordinals as written on disk (4.2)."""

    COMMAND = 0
    DELETE = 1
    CORRUPT = 2
    AVRO_DATA = 3
    HFILE_DATA = 4
    PARQUET_DATA = 5
    CDC_DATA = 6


#: Header/footer key ordinals (4.3); unknown ordinals are kept as ``"UNKNOWN_<n>"``.
HEADER_KEYS = (
    "INSTANT_TIME",
    "TARGET_INSTANT_TIME",
    "SCHEMA",
    "COMMAND_BLOCK_TYPE",
    "COMPACTED_BLOCK_TIMES",
    "RECORD_POSITIONS",
    "BLOCK_IDENTIFIER",
    "IS_PARTIAL",
    "BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS",
)


@dataclass(frozen=True)
class LogBlock:
    """One framed block of a log file.

    ``content`` is the raw content bytes (``None`` when the block was read without content, see
    :func:`iter_log_blocks`); ``content_offset``/``content_length`` locate it in the file so it
    can be loaded later with :meth:`load_content`.
    """

    path: str  # relative to the storage root
    offset: int  # of the magic
    size: int  # total bytes, magic to reverse pointer inclusive
    block_type: BlockType
    header: dict[str, str] = field(default_factory=dict)
    footer: dict[str, str] = field(default_factory=dict)
    content_offset: int = 0
    content_length: int = 0
    content: bytes | None = None

    @property
    def instant_time(self) -> str | None:
        return self.header.get("INSTANT_TIME")

    def load_content(self, storage: Storage) -> bytes:
        """The content bytes, read from storage if they were not read with the block."""
        if self.content is not None:
            return self.content
        if self.content_length == 0:
            return b""
        data = storage.read_range(self.path, self.content_offset, self.content_offset + self.content_length)
        if len(data) != self.content_length:
            raise CorruptTableError(f"{storage.uri}/{self.path}: block content at {self.content_offset} is truncated")
        return data


def _parse_map(buf: bytes, pos: int, where: str) -> tuple[dict[str, str], int]:
    """Decode a header/footer map starting at ``pos``; return it and the position after it."""
    try:
        (count,) = struct.unpack_from(">i", buf, pos)
        pos += 4
        if count < 0 or count > 1024:
            raise CorruptTableError(f"{where}: implausible metadata entry count {count}")
        out: dict[str, str] = {}
        for _ in range(count):
            key, length = struct.unpack_from(">ii", buf, pos)
            pos += 8
            if length < 0 or pos + length > len(buf):
                raise CorruptTableError(f"{where}: metadata value length {length} runs past the block")
            name = HEADER_KEYS[key] if 0 <= key < len(HEADER_KEYS) else f"UNKNOWN_{key}"
            out[name] = buf[pos : pos + length].decode("utf-8")
            pos += length
    except struct.error as err:
        raise CorruptTableError(f"{where}: metadata map runs past the block") from err
    except UnicodeDecodeError as err:
        raise CorruptTableError(f"{where}: metadata value is not UTF-8") from err
    return out, pos


def _parse_prefix(body: bytes, where: str) -> tuple[BlockType, dict[str, str], int, int]:
    """Version, type, header and content length from the start of a block body (the bytes after
    ``blockSize``); returns (type, header, content position in body, content length)."""
    if len(body) < 8:
        raise CorruptTableError(f"{where}: block too short ({len(body)} bytes)")
    version, type_ordinal = struct.unpack_from(">ii", body, 0)
    if version != LOG_FORMAT_VERSION:
        raise UnsupportedTableError(f"{where}: unsupported log format version {version}")
    try:
        block_type = BlockType(type_ordinal)
    except ValueError:
        raise CorruptTableError(f"{where}: unknown log block type {type_ordinal}") from None
    header, pos = _parse_map(body, 8, where)
    if pos + 8 > len(body):
        raise CorruptTableError(f"{where}: content length runs past the block")
    (length,) = struct.unpack_from(">q", body, pos)
    return block_type, header, pos + 8, length


class _ListedSizeDisagrees(Exception):
    """The bytes of a log file do not frame as whole blocks under its listed size: the size was
    wrong (the metadata table lists a rolled-back write's log files with size 1), not the file."""


class _Reader:
    """Sequential block reader over one open file.

    ``file_size`` is exact, or with ``size_is_hint`` a listed size: then any framing irregularity
    (no magic where a block should start, a block running past the size) raises
    :class:`_ListedSizeDisagrees` instead of being reported, so the caller learns the true size
    from storage and reads again.
    """

    def __init__(
        self,
        fh: BinaryIO,
        file_size: int,
        path: str,
        uri: str,
        with_content: bool,
        strict: bool = False,
        size_is_hint: bool = False,
    ):
        self.strict = strict
        self.size_is_hint = size_is_hint
        self.fh = fh
        self.size = file_size
        self.path = path
        self.uri = uri
        self.with_content = with_content

    def _read_at(self, pos: int, n: int) -> bytes:
        self.fh.seek(pos)
        return self.fh.read(n)

    def _next_magic(self, start: int) -> int:
        """Offset of the next magic at or after ``start``; the file size if there is none."""
        pos = start
        while pos < self.size:
            chunk = self._read_at(pos, _SCAN_CHUNK + len(MAGIC) - 1)
            idx = chunk.find(MAGIC)
            if idx >= 0:
                return pos + idx
            pos += _SCAN_CHUNK
        return self.size

    def _framing_ok(self, offset: int, block_size: int) -> bool:
        """Hudi's corrupt-block checks (format doc 4.5)."""
        q = offset + len(MAGIC) + _SIZE_FIELD
        end = q + block_size
        if block_size < _SIZE_FIELD or end > self.size:
            return False
        trailer = self._read_at(end - _SIZE_FIELD, _SIZE_FIELD)
        if len(trailer) != _SIZE_FIELD or struct.unpack(">q", trailer)[0] != block_size + len(MAGIC):
            return False
        if end < self.size:
            following = self._read_at(end, len(MAGIC))
            if following != MAGIC[: len(following)] or (
                len(following) < len(MAGIC) and end + len(following) < self.size
            ):
                return False
        return True

    def blocks(self) -> Iterator[LogBlock]:
        pos = 0
        while pos < self.size:
            magic = self._read_at(pos, len(MAGIC))
            if magic != MAGIC and self.size_is_hint:
                raise _ListedSizeDisagrees(pos)
            if magic != MAGIC:
                raise CorruptTableError(
                    f"{self.uri}/{self.path}: no log block magic at offset {pos} (not a Hudi log file?)"
                )
            raw_size = self._read_at(pos + len(MAGIC), _SIZE_FIELD)
            block_size = struct.unpack(">q", raw_size)[0] if len(raw_size) == _SIZE_FIELD else -1
            if not self._framing_ok(pos, block_size):
                if self.size_is_hint:
                    raise _ListedSizeDisagrees(pos)
                nxt = self._next_magic(pos + len(MAGIC))
                corrupt = LogBlock(self.path, pos, nxt - pos, BlockType.CORRUPT)
                if self.strict:
                    raise CorruptTableError(_corrupt_block_text(self.uri, corrupt))
                report_corrupt_block(self.uri, corrupt)
                yield corrupt
                pos = nxt
                continue
            yield self._block(pos, block_size)
            pos += len(MAGIC) + _SIZE_FIELD + block_size

    def _block(self, offset: int, block_size: int) -> LogBlock:
        """Parse a block whose framing checks passed."""
        where = f"{self.uri}/{self.path} block at offset {offset}"
        start = offset + len(MAGIC) + _SIZE_FIELD
        body_len = block_size - _SIZE_FIELD  # without the reverse pointer
        # Without content, read a prefix that usually holds the whole header (schemas are a few KB).
        body = self._read_at(start, body_len if self.with_content else min(body_len, 16384))
        try:
            block_type, header, content_pos, length = _parse_prefix(body, where)
        except CorruptTableError:
            if len(body) == body_len:
                raise
            body = self._read_at(start, body_len)
            block_type, header, content_pos, length = _parse_prefix(body, where)
        if length < 0 or content_pos + length > body_len:
            raise CorruptTableError(f"{where}: content length {length} runs past the block")
        footer_pos = content_pos + length
        if self.with_content:
            content: bytes | None = body[content_pos:footer_pos]
            tail = body[footer_pos:]
        else:
            content = None
            tail = self._read_at(start + footer_pos, body_len - footer_pos)
        footer, end = _parse_map(tail, 0, where)
        if end != len(tail):
            raise CorruptTableError(f"{where}: {len(tail) - end} unexpected bytes after the footer")
        return LogBlock(
            path=self.path,
            offset=offset,
            size=len(MAGIC) + _SIZE_FIELD + block_size,
            block_type=block_type,
            header=header,
            footer=footer,
            content_offset=start + content_pos,
            content_length=length,
            content=content,
        )


_collectors = threading.local()


def _corrupt_block_text(uri: str, block: LogBlock) -> str:
    return f"{uri}/{block.path}: corrupt log block at offset {block.offset} ({block.size} bytes)"


def report_corrupt_block(uri: str, block: LogBlock) -> None:
    """Warn about the skipped corrupt ``block`` and note it for :func:`collecting_corrupt_blocks`
    (also when a cache hands out the blocks of a file read before: every read reports it). The note,
    which clients are told, names the file by its path in the table only; the warning, for the
    server's log, by its whole location."""
    _note_corrupt_block(f"{block.path}: corrupt log block at offset {block.offset} ({block.size} bytes) skipped")
    warnings.warn(CorruptBlockWarning(f"{_corrupt_block_text(uri, block)} skipped"), stacklevel=3)


def _note_corrupt_block(message: str) -> None:
    notes = getattr(_collectors, "notes", None)
    if notes is not None:
        notes.append(message)


class _CorruptBlockCollector:
    """The ``with`` block of :func:`collecting_corrupt_blocks` (a class: entered once per streamed
    batch, where a generator-based context manager costs several times more)."""

    __slots__ = ("notes", "_outer")

    def __init__(self) -> None:
        self.notes: list[str] = []
        self._outer: list[str] | None = None

    def __enter__(self) -> list[str]:
        self._outer = getattr(_collectors, "notes", None)
        _collectors.notes = self.notes
        return self.notes

    def __exit__(self, *exc: object) -> None:
        outer = self._outer
        _collectors.notes = outer
        if outer is not None:
            outer.extend(self.notes)


def collecting_corrupt_blocks() -> ContextManager[list[str]]:
    """The messages of the corrupt blocks skipped on this thread inside the ``with`` block (they
    are warned about too): how the Flight service tells its clients, not only its log."""
    return _CorruptBlockCollector()


def relay_corrupt_block_notes(notes: Iterable[str]) -> None:
    """Hand notes collected on another thread (a parallel reader's worker) to the collector open
    on this thread, if any; they were warned about where they were found."""
    for message in notes:
        _note_corrupt_block(message)


def iter_log_blocks(
    storage: Storage, path: str, *, size: int | None = None, with_content: bool = True
) -> Iterator[LogBlock]:
    """The blocks of the log file at ``path`` (relative to ``storage``), in file order.

    Corrupt blocks come out as ``BlockType.CORRUPT`` blocks (after a warning) so callers see
    where they were; skip them. With ``with_content=False`` only headers and footers are read
    and :meth:`LogBlock.load_content` fetches a block's content later. ``size``: the file's true
    size when the caller asked storage for it, else it is asked here (a size from a listing is a
    hint: :func:`read_log_files` takes those).
    """
    if not size:
        size = int(storage.info(path)["size"])
    yield from _walk(storage, path, size, with_content, size_is_hint=False)


def _walk(storage: Storage, path: str, size: int, with_content: bool, size_is_hint: bool) -> Iterator[LogBlock]:
    with storage.open(path) as fh:
        yield from _Reader(fh, size, path, storage.uri, with_content, size_is_hint=size_is_hint).blocks()


def iter_log_blocks_in(data: bytes, path: str, uri: str = "", *, strict: bool = False) -> Iterator[LogBlock]:
    """Like :func:`iter_log_blocks` (with content) for a log file already read into memory
    (the metadata-table reader fetches small MDT log files whole, one request each).

    With ``strict`` a corrupt block raises ``CorruptTableError`` instead of being skipped: the
    metadata table is an index, and a skipped block would silently drop files from a plan.
    """
    yield from _Reader(io.BytesIO(data), len(data), path, uri, True, strict).blocks()


#: the log files read whole and together (one range each, in one concurrent request) hold at
#: most this many bytes: the bytes a reader holds at once before it decodes a block
WHOLE_READ_BYTES = 16 << 20


def read_log_files(storage: Storage, files: Sequence[tuple[str, int]]) -> list[list[LogBlock]]:
    """The blocks of each of the log ``files`` (path relative to ``storage``, listed size), in order.

    A listed size (storage listing or metadata table) saves an ``info`` per file: the files are
    read whole, together, in one ``read_ranges`` call (an object store fetches the ranges
    concurrently: one round trip for a slice's logs, where walking block headers costs one
    request per file and another per block content), as long as together they hold at most
    ``WHOLE_READ_BYTES``; their blocks carry their content. The files past the bound, or without
    a listed size, are walked block by block (contents loaded when a block is decoded).

    A listed size is only a hint: Hudi's metadata table lists the log files of a rolled-back
    write with size 1. Where the bytes read do not frame as whole blocks under it (fewer bytes
    than listed, no magic where a block starts, a block running past the listed end), the file's
    true size is asked of storage (one ``info``) and the file read again by it; a file whose size
    is wrong but whose first bytes end exactly on a block boundary reads as those blocks.
    """
    whole, total = [], 0
    for path, size in files:
        if 0 < size <= WHOLE_READ_BYTES - total:
            whole.append((path, size))
            total += size
    datas = storage.read_ranges([p for p, _ in whole], [0] * len(whole), [s for _, s in whole]) if whole else []
    contents = {path: data for (path, _), data in zip(whole, datas)}
    out = []
    for path, size in files:
        data = contents.get(path)
        try:
            if not size:
                blocks = list(iter_log_blocks(storage, path, with_content=False))
            elif data is None:
                blocks = list(_walk(storage, path, size, with_content=False, size_is_hint=True))
            elif len(data) != size:
                raise _ListedSizeDisagrees(len(data))
            else:
                blocks = list(_Reader(io.BytesIO(data), size, path, storage.uri, True, size_is_hint=True).blocks())
        except _ListedSizeDisagrees:
            blocks = _read_by_stored_size(storage, path, data)
        out.append(blocks)
    return out


def _read_by_stored_size(storage: Storage, path: str, read: bytes | None) -> list[LogBlock]:
    """The blocks of a log file whose listed size was wrong, by the size storage tells: from the
    bytes ``read`` already when they are the whole file (it was listed longer), else read whole
    if it is within ``WHOLE_READ_BYTES``, else walked."""
    size = int(storage.info(path)["size"])
    if read is None or len(read) != size:
        if size > WHOLE_READ_BYTES:
            return list(_walk(storage, path, size, with_content=False, size_is_hint=False))
        read = storage.read_range(path, 0, size)
    return list(iter_log_blocks_in(read, path, storage.uri))


__all__ = [
    "WHOLE_READ_BYTES",
    "HEADER_KEYS",
    "MAGIC",
    "BlockType",
    "LogBlock",
    "collecting_corrupt_blocks",
    "iter_log_blocks",
    "iter_log_blocks_in",
    "read_log_files",
    "relay_corrupt_block_notes",
    "report_corrupt_block",
]
