"""Which log blocks of a file slice count for a query (format doc section 4.6).

The scan reads a slice's log files whole and together when they are small (one round trip), else
only block headers (contents fetched later, for the blocks that survive, so rolled-back or too-new
blocks cost no content IO). Rules, in the order Hudi applies them:

1. corrupt blocks are skipped (the framing layer already warned);
2. data and delete blocks written after the query instant are skipped;
3. data and delete blocks of instants that are not committed (inflight, failed, rolled back
   without a command block) are skipped. Table version 6 needs this because its log files mix
   instants; for 8+ the file system view already dropped uncommitted files, and the check is a
   no-op there;
4. a rollback command block removes every earlier collected block of its target instant;
5. log compaction: a block carrying ``COMPACTED_BLOCK_TIMES`` stands in for the blocks of the
   instants it lists (:func:`catalog.format.log_block.apply_log_compaction`);
6. blocks carrying ``IS_PARTIAL=true`` (partial updates, 7.4) are refused: treating them as
   ordinary blocks would return wrong rows.

CDC_DATA blocks are not part of a data table's records and are refused too; HFILE_DATA blocks are
(``hoodie.logfile.data.block.format=hfile``).
"""

from __future__ import annotations

from typing import Iterable, Iterator

from catalog.errors import UnsupportedTableError
from catalog.format.log_block import fold_blocks
from catalog.format.log_file import BlockType, LogBlock, read_log_files
from catalog.storage import Storage
from catalog.table.files import FileSlice
from catalog.timeline import CommitSet

RECORD_BLOCK_TYPES = frozenset({BlockType.AVRO_DATA, BlockType.PARQUET_DATA, BlockType.HFILE_DATA, BlockType.DELETE})


def scan_blocks(
    blocks: Iterable[LogBlock], commits: CommitSet, query_instant: str | None
) -> list[LogBlock]:
    """The data/delete blocks that count, oldest first (rules above)."""

    def accept(block: LogBlock) -> bool:
        kind = block.block_type
        if kind not in RECORD_BLOCK_TYPES:
            raise UnsupportedTableError(f"{block.path}: {kind.name} log blocks are not supported in data tables")
        instant = block.instant_time
        if not instant:
            raise UnsupportedTableError(f"{block.path}: log block at offset {block.offset} has no INSTANT_TIME")
        if block.header.get("IS_PARTIAL", "").lower() == "true":
            raise UnsupportedTableError(f"{block.path}: partial-update log blocks are not supported")
        if query_instant is not None and instant > query_instant:
            return False
        return commits.is_committed(instant)

    return fold_blocks(blocks, accept)


def slice_blocks(storage: Storage, fs: FileSlice) -> Iterator[LogBlock]:
    """Every block of the slice's log files, in log-file order then file order: read whole and
    together where they are small enough (:func:`catalog.format.log_file.read_log_files`), else
    their headers (contents loaded when decoded)."""
    files = [(path, log.size) for path, log in zip(fs.log_file_paths, fs.log_files)]
    for blocks in read_log_files(storage, files):
        yield from blocks


def valid_blocks(storage: Storage, fs: FileSlice, commits: CommitSet, query_instant: str | None) -> list[LogBlock]:
    """The data/delete blocks of ``fs`` to apply, oldest first (contents not loaded yet)."""
    return scan_blocks(slice_blocks(storage, fs), commits, query_instant)


__all__ = ["RECORD_BLOCK_TYPES", "scan_blocks", "slice_blocks", "valid_blocks"]
