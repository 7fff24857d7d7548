"""Hudi's serialized record-key bloom filters (``org.apache.hudi.common.bloom``).

A base Parquet file's footer holds one under ``org.apache.hudi.bloomfilter`` (its kind under
``hoodie_bloom_filter_type_code``, absent on old files: ``SIMPLE``), and the metadata table's
``bloom_filters`` partition keeps a copy per base file (``BloomFilterMetadata``). Both are the
Base64 text of a Java ``DataOutput`` stream (big-endian):

* a filter header: int32 ``-1`` (a positive first int is the pre-versioned layout: that int is the
  hash count and the hash is Jenkins), int32 hash count, int8 hash type (0 Jenkins, 1 Murmur),
  int32 vector size in bits;
* ``SIMPLE``: the header, then ``ceil(bits / 8)`` bytes, bit ``i`` in byte ``i // 8`` under mask
  ``1 << (i % 8)``;
* ``DYNAMIC_V0``: the header, int32 keys per row, int32 keys in the last row, int32 row count,
  then each row as a whole ``SIMPLE`` filter; a key may be in the set if any row holds it.

A key's positions are ``abs(h_i % bits)`` over ``h_i = hash(utf8 key, seed=h_(i-1))``, ``h_-1 = 0``
(signed 32-bit values, Java's remainder). The hashes are Hadoop's MurmurHash 2 (its tail bytes
sign-extended) and Bob Jenkins' lookup3 ``hashlittle``.
"""

from __future__ import annotations

import base64
import binascii
import struct
from dataclasses import dataclass
from functools import lru_cache

from catalog.errors import CorruptTableError, UnsupportedTableError, shown

#: Parquet footer keys of a Hudi base file's filter and its kind
PARQUET_FILTER_KEY, PARQUET_TYPE_CODE_KEY = "org.apache.hudi.bloomfilter", "hoodie_bloom_filter_type_code"
SIMPLE, DYNAMIC_V0 = "SIMPLE", "DYNAMIC_V0"
JENKINS, MURMUR = 0, 1

_M32 = 0xFFFFFFFF
#: far above any filter Hudi writes (its default: 1e-9 false positives needs 30 hashes); bounds
#: the work an untrusted filter can ask for
_MAX_HASHES = 1024


def _signed(value: int) -> int:
    value &= _M32
    return value - (1 << 32) if value & 0x80000000 else value


def murmur2(data: bytes, seed: int) -> int:
    """Hadoop's MurmurHash 2 of ``data`` (signed 32-bit)."""
    m = 0x5BD1E995
    length = len(data)
    h = (seed ^ length) & _M32
    body = length & ~3
    for (k,) in struct.iter_unpack("<I", data[:body]):
        k = (k * m) & _M32
        k ^= k >> 24
        h = ((h * m) & _M32) ^ ((k * m) & _M32)
    tail = data[body:]
    if tail:
        for shift, byte in enumerate(reversed(tail)):
            h ^= ((byte - 256 if byte & 0x80 else byte) << (8 * shift)) & _M32  # Java bytes are signed
        h = (h * m) & _M32
    h ^= h >> 13
    h = (h * m) & _M32
    h ^= h >> 15
    return _signed(h)


def _rot(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _M32


def jenkins_lookup3(data: bytes, seed: int) -> int:
    """Bob Jenkins' lookup3 ``hashlittle`` of ``data`` with ``seed`` (signed 32-bit)."""
    length = len(data)
    a = b = c = (0xDEADBEEF + length + seed) & _M32
    offset = 0
    while length - offset > 12:
        x, y, z = struct.unpack_from("<III", data, offset)
        a, b, c = (a + x) & _M32, (b + y) & _M32, (c + z) & _M32
        a = (a - c) & _M32 ^ _rot(c, 4)
        c = (c + b) & _M32
        b = (b - a) & _M32 ^ _rot(a, 6)
        a = (a + c) & _M32
        c = (c - b) & _M32 ^ _rot(b, 8)
        b = (b + a) & _M32
        a = (a - c) & _M32 ^ _rot(c, 16)
        c = (c + b) & _M32
        b = (b - a) & _M32 ^ _rot(a, 19)
        a = (a + c) & _M32
        c = (c - b) & _M32 ^ _rot(b, 4)
        b = (b + a) & _M32
        offset += 12
    tail = data[offset:]
    if not tail:
        return _signed(c)
    x, y, z = struct.unpack("<III", tail.ljust(12, b"\0"))
    a, b, c = (a + x) & _M32, (b + y) & _M32, (c + z) & _M32
    c = ((c ^ b) - _rot(b, 14)) & _M32
    a = ((a ^ c) - _rot(c, 11)) & _M32
    b = ((b ^ a) - _rot(a, 25)) & _M32
    c = ((c ^ b) - _rot(b, 16)) & _M32
    a = ((a ^ c) - _rot(c, 4)) & _M32
    b = ((b ^ a) - _rot(a, 14)) & _M32
    c = ((c ^ b) - _rot(b, 24)) & _M32
    return _signed(c)


_HASHES = {JENKINS: jenkins_lookup3, MURMUR: murmur2}


@lru_cache(maxsize=4096)
def _positions(key: bytes, bits: int, hashes: int, hash_type: int) -> tuple[int, ...]:
    hash_of = _HASHES[hash_type]
    out, value = [], 0
    for _ in range(hashes):
        value = hash_of(key, value)
        out.append(abs(value) % bits)  # abs(Java remainder): the remainder of abs
    return tuple(out)


@dataclass(frozen=True)
class BitVector:
    """One standard filter: ``bits`` bits, ``hashes`` hash positions per key."""

    bits: int
    hashes: int
    hash_type: int
    vector: bytes

    def holds(self, key: bytes) -> bool:
        vector = self.vector
        return all(vector[i >> 3] & (1 << (i & 7)) for i in _positions(key, self.bits, self.hashes, self.hash_type))


@dataclass(frozen=True)
class BloomFilter:
    """A decoded Hudi bloom filter: one bit vector (``SIMPLE``) or rows of them (``DYNAMIC_V0``)."""

    type_code: str
    rows: tuple[BitVector, ...]

    def might_contain(self, key: str) -> bool:
        """``False`` only if ``key`` was never added (an empty key cannot be hashed: ``True``)."""
        data = key.encode("utf-8")
        return not data or any(row.holds(data) for row in self.rows)


class _Reader:
    def __init__(self, data: bytes, where: str):
        self.data, self.pos, self.where = data, 0, where

    def take(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise CorruptTableError(f"{self.where}: bloom filter truncated at byte {self.pos}")
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return int(value)

    def header(self) -> tuple[int, int, int]:
        """(bits, hashes, hash type) of a filter header."""
        version = self.take(">i")
        if version > 0:
            hashes, hash_type = version, JENKINS
        elif version == -1:
            hashes, hash_type = self.take(">i"), self.take(">b")
        else:
            raise CorruptTableError(f"{self.where}: bloom filter version {version} is not Hudi's")
        bits = self.take(">i")
        if hash_type not in _HASHES or not 0 < hashes <= _MAX_HASHES or bits <= 0:
            raise CorruptTableError(
                f"{self.where}: bloom filter of {bits} bits, {hashes} hashes of type {hash_type} is not Hudi's"
            )
        return bits, hashes, hash_type

    def vector(self) -> BitVector:
        bits, hashes, hash_type = self.header()
        size = (bits + 7) // 8
        if self.pos + size > len(self.data):
            raise CorruptTableError(f"{self.where}: bloom filter vector of {bits} bits runs past its data")
        vector = self.data[self.pos : self.pos + size]
        self.pos += size
        return BitVector(bits, hashes, hash_type, vector)


def parse_bloom_filter(serialized: bytes | str, type_code: str | None, where: str) -> BloomFilter:
    """Decode a filter from its Base64 text (or that text's bytes).

    ``type_code`` ``None`` is ``SIMPLE`` (files written before Hudi named the kind).

    Raises:
        UnsupportedTableError: a kind other than ``SIMPLE`` and ``DYNAMIC_V0``.
        CorruptTableError: text or bytes that are not such a filter.
    """
    code = type_code or SIMPLE
    if code not in (SIMPLE, DYNAMIC_V0):
        raise UnsupportedTableError(
            f"{where}: bloom filter type {shown(code, 32)} is not read (SIMPLE, DYNAMIC_V0 are)"
        )
    try:
        data = base64.b64decode(serialized, validate=True)
    except (binascii.Error, ValueError) as err:
        raise CorruptTableError(f"{where}: bloom filter is not Base64: {err}") from err
    reader = _Reader(data, where)
    if code == SIMPLE:
        rows: tuple[BitVector, ...] = (reader.vector(),)
    else:
        reader.header()  # the dynamic filter's own (no bits): its rows carry their parameters
        reader.take(">i")  # keys per row
        reader.take(">i")  # keys in the last row
        count = reader.take(">i")
        if not 0 < count <= len(data):
            raise CorruptTableError(f"{where}: dynamic bloom filter of {count} rows")
        rows = tuple(reader.vector() for _ in range(count))
    if reader.pos != len(data):
        raise CorruptTableError(f"{where}: {len(data) - reader.pos} bytes after the bloom filter")
    return BloomFilter(code, rows)


__all__ = [
    "DYNAMIC_V0",
    "PARQUET_FILTER_KEY",
    "PARQUET_TYPE_CODE_KEY",
    "SIMPLE",
    "BitVector",
    "BloomFilter",
    "jenkins_lookup3",
    "murmur2",
    "parse_bloom_filter",
]
