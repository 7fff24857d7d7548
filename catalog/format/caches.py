"""The process caches a reader reads through, given beside a read task, never inside one.

A read task (``catalog.read.context.ReadContext`` plus a split) is a plain value: what to read,
with which options. What a process keeps between reads (footers, decoded row groups, decoded
log blocks) is this separate object, handed to the reader the way hudi-rs's file-group reader
is handed its read options: a server gives every read its caches, the library gives the
footer cache planning filled, a task moved to another process is read with that process's own.
"""

from __future__ import annotations

from dataclasses import dataclass

from catalog.format.log_cache import DecodedLogBlocks
from catalog.format.parquet_ranges import FooterSource
from catalog.format.row_groups import DecodedRowGroups


@dataclass(frozen=True)
class ReadCaches:
    """What a reader keeps between reads; every cache is optional.

    Attributes:
        footers: where a remote read takes a base file's footer (the planner's footer cache);
            ``None``: read from the file's tail.
        row_groups: decoded Parquet row groups and footers kept for the next read of the same
            file version; ``None``: decoded for this read only.
        log_blocks: log files' block indexes and decoded blocks; ``None``: read for this read only.
    """

    footers: FooterSource | None = None
    row_groups: DecodedRowGroups | None = None
    log_blocks: DecodedLogBlocks | None = None


#: a reader without caches
NO_CACHES = ReadCaches()

__all__ = ["NO_CACHES", "ReadCaches"]
