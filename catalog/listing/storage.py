"""Storage listing: a ``catalog.fs_view.FileListing`` that lists directories on storage.

The fallback of metadata-table planning (``catalog.listing.mdt_listing``), and the only listing
of tables without a usable metadata table.
"""

from __future__ import annotations

import posixpath
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

from catalog.storage import Storage
from catalog.table.config import TableConfig

PARTITION_METAFILE = ".hoodie_partition_metadata"
_LIST_THREADS = 8


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


__all__ = ["PARTITION_METAFILE", "StorageListing"]
