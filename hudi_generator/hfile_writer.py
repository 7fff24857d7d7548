"""HFile v3 writer producing files shaped like Hudi's own HFile writer output (format digest
section 5): GZ (or uncompressed) data blocks of sorted KeyValues, a single-level root data index,
a meta index, a protobuf file-info block and the 4096-byte trailer with version 3.0."""

from __future__ import annotations

import gzip
import struct
import time
from collections.abc import Iterable

TRAILER_SIZE = 4096
HEADER_SIZE = 33
BYTES_PER_CHECKSUM = 16384
COMPARATOR = "org.apache.hudi.io.storage.HoodieHBaseKVComparator"
CODEC_IDS = {"GZ": 1, "NONE": 2}
_LATEST_TS = 0x7FFFFFFFFFFFFFFF
_PUT = 4


def _varint(n: int) -> bytes:
    """Protobuf base-128 varint (non-negative)."""
    out = bytearray()
    while True:
        low = n & 0x7F
        n >>= 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _hadoop_vint(n: int) -> bytes:
    """Hadoop WritableUtils VLong encoding (used for index key lengths and the memstore TS)."""
    if -112 <= n <= 127:
        return struct.pack(">b", n)
    marker = -112
    if n < 0:
        n = ~n
        marker = -120
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return struct.pack(">b", marker - len(raw)) + raw


def _pb_field(number: int, value: int | bytes) -> bytes:
    if isinstance(value, bytes):
        return _varint(number << 3 | 2) + _varint(len(value)) + value
    return _varint(number << 3) + _varint(value)


def _row_key(row: bytes) -> bytes:
    """A KeyValue key: row length, row, empty family, no qualifier, latest timestamp, type Put."""
    return struct.pack(">H", len(row)) + row + b"\x00" + struct.pack(">qB", _LATEST_TS, _PUT)


class HFileWriter:
    """Collects (row key, value) pairs in sorted order and renders one HFile.

    Hudi keeps one memstore-TS byte per cell (KEY_VALUE_VERSION 1) and writes index keys and
    ``hfile.LASTKEY`` as row-only keys (2-byte length + row).
    """

    def __init__(self, block_size: int = 64 * 1024, compression: str = "GZ") -> None:
        if compression not in CODEC_IDS:
            raise ValueError(f"unsupported HFile compression {compression!r}; use one of {sorted(CODEC_IDS)}")
        self.block_size = block_size
        self.compression = compression
        self._cells: list[tuple[bytes, bytes]] = []
        self._file_info: dict[str, bytes] = {}

    def add(self, row: bytes, value: bytes) -> None:
        if self._cells and row <= self._cells[-1][0]:
            raise ValueError(f"HFile rows must be added in strictly increasing order: {row!r}")
        self._cells.append((row, value))

    def extend(self, cells: Iterable[tuple[bytes, bytes]]) -> None:
        for row, value in cells:
            self.add(row, value)

    def set_file_info(self, key: str, value: bytes) -> None:
        self._file_info[key] = value

    def _block(self, magic: bytes, body: bytes, prev_offset: int) -> bytes:
        data = gzip.compress(body, mtime=0) if self.compression == "GZ" else body
        with_header = HEADER_SIZE + len(data)
        checksum_bytes = 4 * -(-with_header // BYTES_PER_CHECKSUM)
        header = magic + struct.pack(
            ">iiqBii", len(data) + checksum_bytes, len(body), prev_offset, 0, BYTES_PER_CHECKSUM, with_header
        )
        return header + data + b"\x00" * checksum_bytes

    def to_bytes(self) -> bytes:
        out = bytearray()
        index: list[tuple[int, int, bytes]] = []
        prev_data = -1
        pending = bytearray()
        first_row: bytes | None = None

        def flush() -> None:
            nonlocal prev_data, pending, first_row
            assert first_row is not None  # set by the first cell of every pending block
            block = self._block(b"DATABLK*", bytes(pending), prev_data)
            index.append((len(out), len(block), struct.pack(">H", len(first_row)) + first_row))
            prev_data = len(out)
            out.extend(block)
            pending = bytearray()
            first_row = None

        for row, value in self._cells:
            key = _row_key(row)
            if first_row is None:
                first_row = row
            pending += struct.pack(">ii", len(key), len(value)) + key + value + b"\x00"
            if len(pending) >= self.block_size:
                flush()
        if pending:
            flush()
        last_data = index[-1][0] if index else 0

        load_on_open = len(out)
        root = b"".join(struct.pack(">qi", off, size) + _hadoop_vint(len(key)) + key for off, size, key in index)
        root_block = self._block(b"IDXROOT2", root, -1)
        out.extend(root_block)
        out.extend(self._block(b"IDXROOT2", b"", -1))  # meta index: no meta blocks

        n = len(self._cells)
        info = {
            **self._file_info,
            "hfile.LASTKEY": (struct.pack(">H", len(self._cells[-1][0])) + self._cells[-1][0]) if n else b"",
            "hfile.AVG_KEY_LEN": struct.pack(">i", sum(len(r) for r, _ in self._cells) // n if n else 0),
            "hfile.AVG_VALUE_LEN": struct.pack(">i", sum(len(v) for _, v in self._cells) // n if n else 0),
            "hfile.CREATE_TIME_TS": struct.pack(">q", int(time.time() * 1000)),
            "KEY_VALUE_VERSION": struct.pack(">i", 1),
            "MAX_MEMSTORE_TS_KEY": struct.pack(">q", 0),
        }
        if n:
            info["minRecordKey"] = self._cells[0][0]
            info["maxRecordKey"] = self._cells[-1][0]
        proto = b"".join(_pb_field(1, _pb_field(1, k.encode()) + _pb_field(2, v)) for k, v in info.items())
        file_info_offset = len(out)
        out.extend(self._block(b"FILEINF2", b"PBUF" + _varint(len(proto)) + proto, -1))

        trailer_proto = b"".join([
            _pb_field(1, file_info_offset),
            _pb_field(2, load_on_open),
            _pb_field(3, len(root_block)),
            _pb_field(4, sum(len(v) + len(r) + 21 for r, v in self._cells)),
            _pb_field(5, len(index)),
            _pb_field(6, 0),
            _pb_field(7, n),
            _pb_field(8, 1),
            _pb_field(9, 0),
            _pb_field(10, last_data),
            _pb_field(11, COMPARATOR.encode()),
            _pb_field(12, CODEC_IDS[self.compression]),
        ])
        trailer = b'TRABLK"$' + _varint(len(trailer_proto)) + trailer_proto
        trailer += b"\x00" * (TRAILER_SIZE - 4 - len(trailer)) + bytes([0, 0, 0, 3])
        out.extend(trailer)
        return bytes(out)
