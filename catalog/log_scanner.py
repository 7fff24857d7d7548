"""Which log blocks of a file slice count for a query (format doc section 4.6).

The scan reads only block headers (contents are fetched later, for the blocks that survive), so
rolled-back or too-new blocks cost no content IO. Rules, in the order Hudi applies them:

1. corrupt blocks are skipped (the framing layer already warned);
2. data and delete blocks written after the query instant are skipped;
3. data and delete blocks of instants that are not committed (inflight, failed, rolled back
   without a command block) are skipped. Table version 6 needs this because its log files mix
   instants; for 8+ the file system view already dropped uncommitted files, and the check is a
   no-op there;
4. a rollback command block removes every earlier collected block of its target instant;
5. blocks carrying ``COMPACTED_BLOCK_TIMES`` (log compaction) or ``IS_PARTIAL=true`` (partial
   updates, 7.4) are refused: no fixture produces them, and treating them as ordinary blocks
   would return wrong rows.

HFILE_DATA and CDC_DATA blocks are not part of a data table's records and are refused too.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator

from .exceptions import UnsupportedTableError
from .file_slices import FileSlice
from .log_blocks import rollback_target
from .log_format import BlockType, LogBlock, iter_log_blocks
from .storage import Storage
from .timeline import Timeline

RECORD_BLOCK_TYPES = frozenset({BlockType.AVRO_DATA, BlockType.PARQUET_DATA, BlockType.DELETE})


def fold_blocks(blocks: Iterable[LogBlock], accept: Callable[[LogBlock], bool]) -> list[LogBlock]:
    """Blocks in order, skipping corrupt ones and applying rollback command blocks (rule 4).

    ``accept`` decides for every other block whether it counts (it may raise to refuse one);
    the data table's scan and the metadata-table reader differ only there.
    """
    kept: list[LogBlock] = []
    for block in blocks:
        if block.block_type is BlockType.CORRUPT:
            continue
        if block.block_type is BlockType.COMMAND:
            target = rollback_target(block)
            kept = [b for b in kept if b.instant_time != target]
        elif accept(block):
            kept.append(block)
    return kept


def scan_blocks(
    blocks: Iterable[LogBlock], timeline: Timeline, query_instant: str | None
) -> list[LogBlock]:
    """The data/delete blocks that count, oldest first (rules above)."""

    def accept(block: LogBlock) -> bool:
        kind = block.block_type
        if kind not in RECORD_BLOCK_TYPES:
            raise UnsupportedTableError(f"{block.path}: {kind.name} log blocks are not supported in data tables")
        instant = block.instant_time
        if not instant:
            raise UnsupportedTableError(f"{block.path}: log block at offset {block.offset} has no INSTANT_TIME")
        if "COMPACTED_BLOCK_TIMES" in block.header:
            raise UnsupportedTableError(f"{block.path}: log-compacted blocks are not supported")
        if block.header.get("IS_PARTIAL", "").lower() == "true":
            raise UnsupportedTableError(f"{block.path}: partial-update log blocks are not supported")
        if query_instant is not None and instant > query_instant:
            return False
        return timeline.is_committed(instant)

    return fold_blocks(blocks, accept)


def slice_blocks(storage: Storage, fs: FileSlice) -> Iterator[LogBlock]:
    """Headers of every block of the slice's log files, in log-file order then file order."""
    for path in fs.log_file_paths:
        yield from iter_log_blocks(storage, path, with_content=False)


def valid_blocks(storage: Storage, fs: FileSlice, timeline: Timeline, query_instant: str | None) -> list[LogBlock]:
    """The data/delete blocks of ``fs`` to apply, oldest first (contents not loaded yet)."""
    return scan_blocks(slice_blocks(storage, fs), timeline, query_instant)


__all__ = ["RECORD_BLOCK_TYPES", "fold_blocks", "scan_blocks", "slice_blocks", "valid_blocks"]
