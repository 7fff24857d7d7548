"""Where a table's data files are: the FileListing protocol and its storage-listing implementation.

The metadata-table listing (``catalog.mdt_listing``) implements the same protocol.
"""

from __future__ import annotations

import posixpath
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, Sequence

from .config import TableConfig
from .storage import Storage

PARTITION_METAFILE = ".hoodie_partition_metadata"
_LIST_THREADS = 8


class FileListing(Protocol):
    """Partitions and their files; files are NOT filtered by the timeline.

    A listing may also offer two optional pruning capabilities, which ``TableScan`` calls when
    the query has filters (both must keep anything they cannot prove empty):

    * ``prune_partitions(partitions, filters, instant=...) -> list[str]`` (e.g. partition statistics);
    * ``prune_slices(slices, filters, instant=...) -> Iterable[FileSlice]`` (e.g. column statistics
      or the record index); ``filters`` are ``catalog.filters.BoundFilter`` objects and
      ``instant`` is the query instant (indexes that describe only the latest state need it).
    """

    def list_partitions(self) -> list[str]:
        """Relative partition paths; ``""`` for a non-partitioned table."""
        ...

    def list_files(self, partitions: Sequence[str]) -> dict[str, list[tuple[str, int]]]:
        """Partition -> [(file name, size in bytes)], base and log files alike."""
        ...


def _is_partition_marker(name: str) -> bool:
    return name == PARTITION_METAFILE or name.startswith(PARTITION_METAFILE + ".")


class StorageListing:
    """A FileListing that lists directories on storage (one ``ls`` per directory)."""

    def __init__(self, storage: Storage, config: TableConfig):
        self.storage = storage
        self.config = config

    def list_partitions(self) -> list[str]:
        if not self.config.is_partitioned:
            return [""]
        found: list[str] = []
        frontier = [""]
        with ThreadPoolExecutor(_LIST_THREADS) as pool:
            while frontier:
                listings = list(pool.map(self._ls_or_empty, frontier))
                nxt: list[str] = []
                for rel, entries in zip(frontier, listings):
                    if rel and any(_is_partition_marker(e["name"]) for e in entries if e["type"] == "file"):
                        found.append(rel)
                    for e in entries:
                        if e["type"] == "directory" and not e["name"].startswith("."):
                            nxt.append(posixpath.join(rel, e["name"]) if rel else e["name"])
                frontier = nxt
        return sorted(found)

    def list_files(self, partitions: Sequence[str]) -> dict[str, list[tuple[str, int]]]:
        parts = list(partitions)
        with ThreadPoolExecutor(_LIST_THREADS) as pool:
            listings = list(pool.map(self._ls_or_empty, parts))
        out: dict[str, list[tuple[str, int]]] = {}
        for rel, entries in zip(parts, listings):
            out[rel] = [
                (e["name"], int(e["size"]))
                for e in entries
                if e["type"] == "file" and not _is_partition_marker(e["name"])
            ]
        return out

    def _ls_or_empty(self, rel: str) -> list[dict]:
        try:
            return self.storage.ls(rel)
        except FileNotFoundError:
            return []


__all__ = ["FileListing", "StorageListing", "PARTITION_METAFILE"]
