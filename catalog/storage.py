"""Storage access for a table: one fsspec filesystem resolved from the table URL.

Every read the catalog makes goes through :class:`Storage`, which counts requests by kind so
that tests and benchmarks can measure planning cost (list / info / open / read bytes).
"""

from __future__ import annotations

import posixpath
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from fsspec.core import url_to_fs

from catalog.errors import TableNotFoundError


@dataclass
class RequestStats:
    """Counts of storage requests, by kind, plus bytes read."""

    counts: Counter = field(default_factory=Counter)
    bytes_read: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, kind: str, nbytes: int = 0) -> None:
        with self._lock:
            self.counts[kind] += 1
            self.bytes_read += nbytes

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            out = dict(self.counts)
            out["bytes_read"] = self.bytes_read
            out["total"] = sum(self.counts.values())
            return out

    def reset(self) -> None:
        with self._lock:
            self.counts.clear()
            self.bytes_read = 0


class Storage:
    """A table's filesystem plus its root path, with request accounting.

    Paths given to the methods are relative to the table root (``""`` is the root itself).
    """

    def __init__(self, uri: str, storage_options: Mapping[str, Any] | None = None):
        self.uri = uri
        self.storage_options = dict(storage_options or {})
        self.fs, root = url_to_fs(uri, **self.storage_options)
        self.root = root.rstrip("/") if root not in ("/", "") else root
        self.stats = RequestStats()

    # -- paths -------------------------------------------------------------------------
    def full_path(self, rel: str) -> str:
        if not rel:
            return self.root
        return posixpath.join(self.root, rel) if self.root else rel

    def child(self, rel: str) -> "Storage":
        """A Storage rooted at ``rel`` that shares this one's filesystem and counters."""
        clone = object.__new__(Storage)
        clone.uri = self.uri.rstrip("/") + "/" + rel
        clone.storage_options = self.storage_options
        clone.fs = self.fs
        clone.root = self.full_path(rel)
        clone.stats = self.stats
        return clone

    # -- counted requests ----------------------------------------------------------------
    def ls(self, rel: str = "") -> list[dict[str, Any]]:
        """List one directory: entries with ``name`` (base name), ``size`` and ``type``."""
        self.stats.add("list")
        path = self.full_path(rel)
        entries = self.fs.ls(path, detail=True)
        out = []
        for e in entries:
            name = posixpath.basename(e["name"].rstrip("/"))
            out.append({"name": name, "size": e.get("size") or 0, "type": e.get("type", "file")})
        return out

    def exists(self, rel: str) -> bool:
        self.stats.add("info")
        return self.fs.exists(self.full_path(rel))

    def info(self, rel: str) -> dict[str, Any]:
        self.stats.add("info")
        return self.fs.info(self.full_path(rel))

    def read_bytes(self, rel: str) -> bytes:
        data = self.fs.cat_file(self.full_path(rel))
        self.stats.add("read", len(data))
        return data

    def read_range(self, rel: str, start: int, end: int) -> bytes:
        data = self.fs.cat_file(self.full_path(rel), start=start, end=end)
        self.stats.add("read", len(data))
        return data

    def read_ranges(self, rels: Iterable[str], starts: list[int], ends: list[int | None]) -> list[bytes]:
        paths = [self.full_path(r) for r in rels]
        out = self.fs.cat_ranges(paths, starts, ends)
        for chunk in out:
            if isinstance(chunk, Exception):
                raise chunk
            self.stats.add("read", len(chunk))
        return out

    def open(self, rel: str, **kwargs: Any):
        """Open a file for reading; reads made through the handle are not counted one by one."""
        self.stats.add("open")
        return self.fs.open(self.full_path(rel), "rb", **kwargs)

    def arrow_filesystem(self) -> Any:
        """Arrow's native ``LocalFileSystem`` for local tables, else ``None``: read through fsspec.

        pyarrow's dataset scan reads and decodes on Arrow's own thread pools whatever
        ``use_threads`` says. Over a Python-backed filesystem (``PyFileSystem(FSSpecHandler)``)
        those threads take the GIL to read and to drop their last references to Python objects,
        and one that does so while the interpreter finalizes is killed by CPython inside a
        ``noexcept`` destructor: the process aborts ("terminate called without an active
        exception"). So no Python-backed filesystem is ever handed to Arrow: remote stores and
        caller-registered filesystems are read through fsspec file objects on Python threads
        (:func:`catalog.format.parquet.read_parquet`), and every request still goes through fsspec.
        """
        import pyarrow.fs as pafs
        from fsspec.implementations.local import LocalFileSystem

        if type(self.fs) is LocalFileSystem:  # exactly fsspec's own: a registered subclass stays on fsspec
            return pafs.LocalFileSystem()
        return None

    def __getstate__(self) -> dict[str, Any]:
        # fsspec filesystems pickle by their constructor arguments; counters start afresh.
        return {"uri": self.uri, "storage_options": self.storage_options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        type(self).__init__(self, state["uri"], state["storage_options"])


def open_table_storage(uri: str, storage_options: Mapping[str, Any] | None = None) -> Storage:
    """Resolve ``uri`` and check it holds a Hudi table."""
    try:
        storage = Storage(uri, storage_options)
    except (ValueError, ImportError) as err:
        raise TableNotFoundError(f"cannot resolve storage for {uri!r}: {err}") from err
    return storage


__all__ = ["RequestStats", "Storage", "open_table_storage"]
