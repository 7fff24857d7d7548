"""Storage listing: a ``catalog.fs_view.FileListing`` that lists directories on storage.

The fallback of metadata-table planning (``catalog.listing.mdt_listing``), and the only listing
of tables without a usable metadata table.
"""

from __future__ import annotations

import posixpath
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

from catalog.storage import Storage
from catalog.table.config import TableConfig

PARTITION_METAFILE = ".hoodie_partition_metadata"
_LIST_THREADS = 8


def _is_partition_marker(name: str) -> bool:
    return name == PARTITION_METAFILE or name.startswith(PARTITION_METAFILE + ".")


class StorageListing:
    """A FileListing that lists directories on storage (one ``ls`` per directory), each once:
    a listing describes the table as of one timeline, like the state that holds it."""

    def __init__(self, storage: Storage, config: TableConfig):
        self.storage = storage
        self.config = config
        self._partitions: list[str] | None = None
        self._files: dict[str, list[tuple[str, int]]] = {}
        self._file_count = 0
        self._lock = threading.Lock()

    def estimated_bytes(self) -> int:
        return 100 * (len(self._partitions or ()) + len(self._files)) + 160 * self._file_count

    def list_partitions(self) -> list[str]:
        if self._partitions is None:
            self._partitions = self._list_partitions()
        return list(self._partitions)

    def _list_partitions(self) -> list[str]:
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
        parts = [p for p in dict.fromkeys(partitions) if p not in self._files]
        if parts:
            with ThreadPoolExecutor(min(_LIST_THREADS, len(parts))) as pool:
                listings = list(pool.map(self._ls_or_empty, parts))
            with self._lock:
                for rel, entries in zip(parts, listings):
                    files = [
                        (e["name"], int(e["size"]))
                        for e in entries
                        if e["type"] == "file" and not _is_partition_marker(e["name"])
                    ]
                    if rel not in self._files:
                        self._file_count += len(files)
                    self._files[rel] = files
        return {p: self._files[p] for p in partitions}

    def _ls_or_empty(self, rel: str) -> list[dict]:
        try:
            return self.storage.ls(rel)
        except FileNotFoundError:
            return []


__all__ = ["PARTITION_METAFILE", "StorageListing"]
