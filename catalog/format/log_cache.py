"""Log files of filtered reads as immutable bytes: each file's block index and decoded blocks, kept.

A merge-on-read point or filter query reads the same log files again and again: walking a file's block
headers costs a request per block, decoding a data block (Avro) costs more CPU than the rest of
the query. Both are kept here, so a warm point query on a MOR table reads no log file at all;
and for a filtered read, a slice's valid blocks folded into one winning row per key (the fold
is most of a warm MOR filter query's CPU otherwise).

Safe because a log file's bytes are fixed by its path and size, both known from the listing or
the metadata table (the key is the normalised full path and that size; no ``info`` is asked):
Hudi writes a log file once and never rewrites it in place. Where a file system allows appends
(table version 6 on HDFS), an appended file has another size, so another key. A file rewritten
under the same name with the same size is not detected (as for the base files of
:class:`~catalog.format.row_groups.DecodedRowGroups`). A listed size is a hint (the metadata
table lists a rolled-back write's log files with size 1): a file whose bytes do not frame under
it is read by the size storage tells, and kept under the listed one.

Beside a decoded block, where each record key sits in it (:class:`KeyRows`): a point read then
narrows a block to its keys by a dictionary look-up, not by a hash set built over the block's
keys on every query (most blocks of a slice hold none of the keys looked up).

Cold, the log files of a slice are read as scans read them
(:func:`catalog.format.log_file.read_log_files`: whole and together, up to a bound). Bounded in
bytes; a reader is given it beside its read task (:class:`catalog.format.caches.ReadCaches`) and
uses it for filtered reads only (point reads and other filters), so scans never churn it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Hashable, Iterable, Mapping, Sequence, Union

import pyarrow as pa
import pyarrow.compute as pc

from catalog.format.log_block import DeleteRecords, decode_record_block
from catalog.format.log_file import BlockType, LogBlock, read_log_files, report_corrupt_block
from catalog.lru import BoundedLRU, CacheListener, CacheStats
from catalog.storage import Storage

#: what a kept block header is charged beyond its header and footer text
_BLOCK_OVERHEAD = 512
#: what a delete block's ordering value is charged (a Python object in a list)
_VALUE_BYTES = 64
#: what a :class:`KeyRows` entry is charged beyond its key's text (the dict slot, str and tuple)
_KEY_ENTRY_BYTES = 160

#: a data block's records or a delete block's keys
Decoded = Union[pa.Table, DeleteRecords]


def _index_bytes(blocks: Sequence[LogBlock]) -> int:
    text = sum(len(v) for b in blocks for m in (b.header, b.footer) for v in m.values())
    return text + _BLOCK_OVERHEAD * (len(blocks) + 1)


def _decoded_bytes(value: Decoded) -> int:
    if isinstance(value, pa.Table):
        return value.nbytes
    return value.record_keys.nbytes + value.partition_paths.nbytes + _VALUE_BYTES * len(value.ordering_values)


@dataclass(frozen=True)
class KeyRows:
    """Where each record key sits in a decoded block: key -> its rows, in row order."""

    rows: Mapping[str, tuple[int, ...]]

    @classmethod
    def of(cls, keys: pa.Array) -> "KeyRows":
        """The rows of each non-null value of ``keys`` (cast to string, as a key comparison does)."""
        if not (pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type)):
            keys = pc.cast(keys, pa.string())  # e.g. dictionary-encoded keys of a Parquet block
        rows: dict[str, list[int]] = {}
        for row, key in enumerate(keys.to_pylist()):
            if key is not None:
                rows.setdefault(key, []).append(row)
        return cls({key: tuple(at) for key, at in rows.items()})

    def positions(self, wanted: Iterable[str]) -> list[int]:
        """The rows holding one of ``wanted`` (distinct keys), in row order."""
        return sorted(row for key in wanted for row in self.rows.get(key, ()))

    @property
    def nbytes(self) -> int:
        return sum(len(key) + _KEY_ENTRY_BYTES + 8 * len(at) for key, at in self.rows.items())


class DecodedLogBlocks:
    """Block indexes (headers and footers) and decoded data / delete blocks of log files; thread safe.

    Args:
        max_bytes: the bound of indexes and decoded blocks together (0: keep nothing).
        listener: hears the hits, misses and evictions (see :class:`~catalog.lru.BoundedLRU`).
    """

    def __init__(self, max_bytes: int, listener: CacheListener | None = None):
        self._lru: BoundedLRU[Hashable, tuple[LogBlock, ...] | Decoded | KeyRows] = BoundedLRU(
            "log_blocks", max_bytes, listener=listener
        )

    def blocks(self, storage: Storage, files: Sequence[tuple[str, int]]) -> list[LogBlock]:
        """Every block of the log ``files`` (path relative to ``storage``, listed size), in order.

        Kept indexes answer without a request (their corrupt blocks reported again, as a read
        would); the other files are read, whole and together up to ``WHOLE_READ_BYTES``.
        Blocks read now carry their content; blocks of kept indexes load it when decoded.
        """
        keys = [(storage.file_uri(path), size, path) for path, size in files]
        kept = [self._lru.get(key) if size else None for key, (_, size) in zip(keys, files)]
        cold = [file for file, index in zip(files, kept) if index is None]
        fetched = iter(read_log_files(storage, cold))
        out: list[LogBlock] = []
        for key, index in zip(keys, kept):
            if isinstance(index, tuple):
                for block in index:
                    if block.block_type is BlockType.CORRUPT:
                        report_corrupt_block(storage.uri, block)
                out.extend(index)
                continue
            read = next(fetched)
            out.extend(read)
            if key[1]:
                stripped = tuple(replace(b, content=None) for b in read)
                self._lru.put(key, stripped, _index_bytes(stripped))
        return out

    def decoded(self, storage: Storage, block: LogBlock, file_size: int) -> Decoded:
        """The records of data ``block`` (or the keys of a delete block) of the log file of
        ``file_size`` bytes, decoded once per file version."""
        key = (storage.file_uri(block.path), file_size, block.offset)
        hit = self._lru.get(key) if file_size else None
        if isinstance(hit, (pa.Table, DeleteRecords)):
            return hit
        value = decode_record_block(block, block.load_content(storage))
        if file_size:
            self._lru.put(key, value, _decoded_bytes(value))
        return value

    def key_rows(
        self, storage: Storage, block: LogBlock, file_size: int, name: Hashable, keys: Callable[[], pa.Array]
    ) -> KeyRows:
        """Where each of the ``keys()`` of decoded ``block`` sits (``name``: which keys, e.g. the
        record key fields they were built from), found once per file version and kept."""
        key = (storage.file_uri(block.path), file_size, block.offset, name)
        hit = self._lru.get(key) if file_size else None
        if isinstance(hit, KeyRows):
            return hit
        value = KeyRows.of(keys())
        if file_size:
            self._lru.put(key, value, value.nbytes)
        return value

    def folded(
        self,
        storage: Storage,
        blocks: Sequence[tuple[LogBlock, int]],
        merge: Hashable,
        fold: Callable[[], pa.Table | None],
    ) -> pa.Table | None:
        """The rows ``fold()`` makes of the valid data and delete ``blocks`` of a file slice (each
        with its log file's listed size), folded under ``merge`` (what else the fold depends on),
        once per such set of file versions; ``None`` (nothing folded) is not kept."""
        if not blocks or not all(size for _, size in blocks):
            return fold()
        key = ("folded", tuple((storage.file_uri(b.path), size, b.offset) for b, size in blocks), merge)
        hit = self._lru.get(key)
        if isinstance(hit, pa.Table):
            return hit
        value = fold()
        if value is not None:
            self._lru.put(key, value, value.nbytes + _BLOCK_OVERHEAD)
        return value

    def stats(self) -> CacheStats:
        return self._lru.stats()


__all__ = ["Decoded", "DecodedLogBlocks", "KeyRows"]
