"""A local disk cache of remote file bytes, bounded in bytes, that storage can never break.

Only for remote protocols (anything but the local filesystem), and only for Hudi's immutable
files: base files and log files (of the table and of its metadata table), recognised by name.
``hoodie.properties``, instant files and every listing always go to storage, so a commit is
never hidden. Bytes are kept in fixed blocks (``BLOCK_BYTES``) of a file, one disk file per
block, named by a digest of (path, block), in a private folder of this process under the state
dir (``<state_dir>/disk-cache/<pid>``; folders of processes no longer alive are removed).

The size an immutable file had when first asked is kept too (``INFOS_KEPT`` of them), so opening
it again asks storage nothing.

The cache is an optimisation only: a block file that vanished, a folder deleted while serving,
or a full disk (any ``OSError`` while reading or writing a block) make that read go to storage
and the block is dropped or not kept; the query answers the same rows. The bound is
``disk_cache_bytes`` per process; the least recently used blocks leave first.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import shutil
import threading
from pathlib import Path
from typing import Any

from fsspec.implementations.local import LocalFileSystem
from fsspec.spec import AbstractBufferedFile, AbstractFileSystem

from catalog.lru import BoundedLRU, CacheListener, CacheStats
from catalog.table.files import BaseFile, LogFile
from flight_server.server.security.state_files import private_dir, process_alive

log = logging.getLogger(__name__)
#: small enough that a column chunk's range fetches little beyond it
BLOCK_BYTES = 256 << 10
#: infos of immutable files a filesystem view keeps (a few hundred bytes each)
INFOS_KEPT = 16384
_PID_DIR = re.compile(r"^\d+$")


def is_immutable(path: str) -> bool:
    """A Hudi base or log file (its bytes never change once written to an object store)."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return BaseFile.parse(name) is not None or LogFile.parse(name) is not None


class DiskCache:
    """Blocks of remote files on local disk, bounded in bytes (see the module docstring)."""

    def __init__(self, root: Path, max_bytes: int, listener: CacheListener | None = None):
        self.root = root / str(os.getpid())
        self._remove_stale(root)
        private_dir(self.root)
        #: block key -> (its file, the length it was written with)
        self._blocks: BoundedLRU[str, tuple[Path, int]] = BoundedLRU(
            "disk", max_bytes, listener=listener, on_evict=lambda key, kept: kept[0].unlink(missing_ok=True)
        )
        self.fallbacks = 0  # reads that went to storage because the disk failed

    @staticmethod
    def _remove_stale(root: Path) -> None:
        if not root.is_dir():
            return
        for child in root.iterdir():
            if _PID_DIR.match(child.name) and int(child.name) != os.getpid() and not process_alive(int(child.name)):
                shutil.rmtree(child, ignore_errors=True)

    def wrap(self, fs: AbstractFileSystem) -> AbstractFileSystem:
        """``fs`` with this cache in front of its immutable file reads; local ones unchanged."""
        if isinstance(fs, LocalFileSystem) and type(fs) is LocalFileSystem:
            return fs
        return DiskCachedFileSystem(fs, self)

    def stats(self) -> CacheStats:
        return self._blocks.stats()

    # -- blocks --------------------------------------------------------------------------------
    @staticmethod
    def _key(fs: AbstractFileSystem, path: str, index: int) -> str:
        return hashlib.sha256(f"{fs.unstrip_protocol(path)}\0{index}".encode()).hexdigest()

    def _held(self, key: str) -> bytes | None:
        """A kept block's bytes, or ``None`` (not kept, or unreadable or not the length it was
        kept with: then forgotten, and storage answers)."""
        kept = self._blocks.get(key)
        if kept is None:
            return None
        where, length = kept
        try:
            data = where.read_bytes()
            if len(data) == length:
                return data
            problem = "its length changed"
        except OSError as err:  # deleted under us, unreadable
            problem = type(err).__name__
        self.fallbacks += 1
        self._blocks.pop(key)
        log.warning("disk cache block unreadable, reading storage: %s", problem)
        return None

    def ranges(self, fs: AbstractFileSystem, wanted: list[tuple[str, int, int]]) -> list[bytes]:
        """The bytes ``[start, end)`` of each ``(path, start, end)`` of ``fs``, from the blocks
        covering them. Blocks not on disk are fetched with one ``cat_ranges`` call, one request
        per run of consecutive missing blocks (concurrent on async filesystems), and kept."""
        blocks: dict[tuple[str, int], bytes] = {}
        runs: list[tuple[str, int, int]] = []  # (path, first block, last block) to fetch
        for path, start, end in wanted:
            for index in range(start // BLOCK_BYTES, (end - 1) // BLOCK_BYTES + 1 if end > start else 0):
                if (path, index) in blocks or (runs and runs[-1][0] == path and runs[-1][1] <= index <= runs[-1][2]):
                    continue
                data = self._held(self._key(fs, path, index))
                if data is not None:
                    blocks[path, index] = data
                elif runs and runs[-1][0] == path and runs[-1][2] == index - 1:
                    runs[-1] = (path, runs[-1][1], index)
                else:
                    runs.append((path, index, index))
        if runs:
            starts = [first * BLOCK_BYTES for _, first, _ in runs]
            ends = [(last + 1) * BLOCK_BYTES for _, _, last in runs]
            for (path, first, last), data in zip(runs, fs.cat_ranges([p for p, _, _ in runs], starts, ends)):
                if isinstance(data, Exception):
                    raise data
                for index in range(first, last + 1):
                    part = data[(index - first) * BLOCK_BYTES : (index - first + 1) * BLOCK_BYTES]
                    self._keep(self._key(fs, path, index), part)
                    blocks[path, index] = part
        out = []
        for path, start, end in wanted:
            if end <= start:
                out.append(b"")
                continue
            first = start // BLOCK_BYTES
            data = b"".join(blocks[path, i] for i in range(first, (end - 1) // BLOCK_BYTES + 1))
            out.append(data[start - first * BLOCK_BYTES : end - first * BLOCK_BYTES])
        return out

    def _keep(self, key: str, data: bytes) -> None:
        if len(data) > self._blocks.max_entry_bytes:
            return
        target = self.root / key
        # a temp name of this thread's own: two requests fetching the same block at once must
        # not write into one file (the second truncates what the first renames into place)
        temp = target.with_name(f"{key}.{threading.get_ident()}.tmp")
        try:
            private_dir(self.root)  # recreated if it was deleted while serving
            with open(temp, "wb") as fh:
                fh.write(data)
            os.replace(temp, target)
        except OSError as err:  # full disk, folder gone, read-only: serve without keeping it
            self.fallbacks += 1
            with contextlib.suppress(OSError):
                temp.unlink(missing_ok=True)
            log.warning("disk cache cannot keep a block: %s", type(err).__name__)
            return
        self._blocks.put(key, (target, len(data)), len(data))


def _cached_range(path: str, start: int | None, end: int | None) -> tuple[str, int, int] | None:
    """``(path, start, end)`` when the disk cache serves that range (explicit, non-negative, of
    an immutable file; an empty one counts as ``end == start``), else ``None``."""
    if not is_immutable(path) or end is None or end < 0 or (start is not None and start < 0):
        return None
    return path, start or 0, max(end, start or 0)


class _CachedFile(AbstractBufferedFile):
    def _fetch_range(self, start: int, end: int) -> bytes:
        return self.fs.cat_file(self.path, start=start, end=end)


class DiskCachedFileSystem(AbstractFileSystem):
    """A read-only view of ``target`` whose immutable files' bytes come through a DiskCache."""

    cachable = False
    protocol = ("hudi-disk-cache",)

    def __init__(self, target: AbstractFileSystem, cache: DiskCache):
        super().__init__()
        self.target = target
        self.cache = cache
        self._infos: dict[str, dict[str, Any]] = {}  # immutable files' info: their size never changes

    @classmethod
    def _strip_protocol(cls, path: Any) -> str:
        return str(path)

    def unstrip_protocol(self, name: str) -> str:
        return self.target.unstrip_protocol(name)

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> Any:
        return self.target.ls(path, detail=detail, **kwargs)

    def invalidate_cache(self, path: str | None = None) -> None:
        self.target.invalidate_cache(path)

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        """An immutable file's info is asked once (opening a file for reading asks its size:
        a warm read of a log file would otherwise cost a request for nothing new)."""
        if not is_immutable(path):
            return self.target.info(path, **kwargs)
        known = self._infos.get(path)
        if known is None:
            known = self.target.info(path, **kwargs)
            if len(self._infos) >= INFOS_KEPT:
                self._infos.clear()
            self._infos[path] = known
        return known

    def exists(self, path: str, **kwargs: Any) -> bool:
        return self.target.exists(path, **kwargs)

    def cat_file(self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any) -> bytes:
        wanted = _cached_range(path, start, end)
        if wanted is None:
            return self.target.cat_file(path, start=start, end=end, **kwargs)
        return self.cache.ranges(self.target, [wanted])[0]

    def cat_ranges(
        self, paths: list[str], starts: list[int | None], ends: list[int | None], max_gap: Any = None,
        on_error: str = "return", **kwargs: Any,
    ) -> list[bytes | Exception]:
        """Ranges of immutable files from the disk cache's blocks, fetched at once when missing
        (see :meth:`DiskCache.ranges`); other ranges straight from the target filesystem."""
        wanted = [_cached_range(p, s, e) for p, s, e in zip(paths, starts, ends)]
        direct = [i for i, w in enumerate(wanted) if w is None]
        out: list[bytes | Exception] = [b""] * len(paths)
        if direct:
            answers = self.target.cat_ranges(
                [paths[i] for i in direct], [starts[i] for i in direct], [ends[i] for i in direct], on_error=on_error
            )
            for i, data in zip(direct, answers):
                out[i] = data
        cached = [(i, w) for i, w in enumerate(wanted) if w is not None]
        for (i, _), data in zip(cached, self.cache.ranges(self.target, [w for _, w in cached])):
            out[i] = data
        return out

    def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        if mode != "rb":
            raise PermissionError("the disk cache is read-only")
        if not is_immutable(path):
            return self.target.open(path, mode, **kwargs)
        return _CachedFile(self, path, mode, size=kwargs.get("size"), cache_type="readahead")


__all__ = ["BLOCK_BYTES", "DiskCache", "DiskCachedFileSystem", "is_immutable"]
