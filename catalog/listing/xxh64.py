"""XXH64 of the short keys Hudi's metadata table hashes (column names and partition paths of the
stats partitions). The compiled ``xxhash`` package (extra ``server``) is used when installed; the
pure-Python algorithm here keeps the reader's dependencies to pyarrow, fastavro and fsspec."""

from __future__ import annotations

from types import ModuleType

_compiled: ModuleType | None
try:
    import xxhash as _compiled
except ModuleNotFoundError:  # an optional accelerator, not a requirement
    _compiled = None

_MASK = (1 << 64) - 1
_P1 = 11400714785074694791
_P2 = 14029467366897019727
_P3 = 1609587929392839161
_P4 = 9650029242287828579
_P5 = 2870177450012600261


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * _P2) & _MASK, 31) * _P1) & _MASK


def _merge(acc: int, lane: int) -> int:
    return ((acc ^ _round(0, lane)) * _P1 + _P4) & _MASK


def xxh64(data: bytes, seed: int = 0) -> int:
    """The XXH64 hash of ``data`` (the algorithm of the xxHash specification)."""
    n = len(data)
    i = 0
    if n >= 32:
        v1, v2, v3, v4 = (seed + _P1 + _P2) & _MASK, (seed + _P2) & _MASK, seed & _MASK, (seed - _P1) & _MASK
        while i + 32 <= n:
            v1 = _round(v1, int.from_bytes(data[i:i + 8], "little"))
            v2 = _round(v2, int.from_bytes(data[i + 8:i + 16], "little"))
            v3 = _round(v3, int.from_bytes(data[i + 16:i + 24], "little"))
            v4 = _round(v4, int.from_bytes(data[i + 24:i + 32], "little"))
            i += 32
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _MASK
        for v in (v1, v2, v3, v4):
            h = _merge(h, v)
    else:
        h = (seed + _P5) & _MASK
    h = (h + n) & _MASK
    while i + 8 <= n:
        h ^= _round(0, int.from_bytes(data[i:i + 8], "little"))
        h = (_rotl(h, 27) * _P1 + _P4) & _MASK
        i += 8
    if i + 4 <= n:
        h ^= (int.from_bytes(data[i:i + 4], "little") * _P1) & _MASK
        h = (_rotl(h, 23) * _P2 + _P3) & _MASK
        i += 4
    while i < n:
        h ^= (data[i] * _P5) & _MASK
        h = (_rotl(h, 11) * _P1) & _MASK
        i += 1
    h ^= h >> 33
    h = (h * _P2) & _MASK
    h ^= h >> 29
    h = (h * _P3) & _MASK
    h ^= h >> 32
    return h


def xxh64_digest(data: bytes, seed: int = 0) -> bytes:
    """The canonical (big-endian) 8-byte digest, as ``xxhash.xxh64(...).digest()``."""
    if _compiled is not None:
        return _compiled.xxh64(data, seed=seed).digest()
    return xxh64(data, seed).to_bytes(8, "big")


__all__ = ["xxh64", "xxh64_digest"]
