"""Storage access for a table: one fsspec filesystem resolved from the table URL.

Every read the catalog makes goes through :class:`Storage`, which counts requests by kind so
that tests and benchmarks can measure planning cost (list / info / open / read bytes). Besides
each table's own :class:`RequestStats`, every request is told to the process-wide listeners of
:func:`add_request_listener` (a server mirrors them into its metrics).

Reads are idempotent, so a request that fails transiently (a dropped connection, a timeout, a
5xx turned into ``OSError`` by the filesystem) is retried a few times with a short backoff; one
that keeps failing raises :class:`~catalog.errors.StorageUnavailableError` naming the file.
Missing files and refused permissions are answers, not transient failures: never retried.
"""

from __future__ import annotations

import functools
import posixpath
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, TypeVar

from fsspec.core import url_to_fs

from catalog.errors import StorageUnavailableError, TableNotFoundError
from catalog.optional import NotInstalledError, missing_filesystem
from catalog.s3_listing import fast_listing_timestamps

T = TypeVar("T")
#: ``listener(kind, bytes read)`` for every counted request of every Storage of the process
RequestListener = Callable[[str, int], None]
_listeners: list[RequestListener] = []
#: seconds slept before the 2nd, 3rd ... attempt of a failed idempotent request
RETRY_BACKOFF = (0.05, 0.2)
#: normalised file URIs a Storage keeps (``Storage.file_uri``; a few hundred bytes each)
FILE_URIS_KEPT = 4096
_ANSWERS = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError, FileExistsError)


def add_request_listener(listener: RequestListener) -> None:
    """Tell ``listener`` about every storage request of this process from now on."""
    if listener not in _listeners:
        _listeners.append(listener)


def remove_request_listener(listener: RequestListener) -> None:
    if listener in _listeners:
        _listeners.remove(listener)


def _retrying(what: str, attempt: Callable[[], T]) -> T:
    """``attempt()``, retried after transient ``OSError``s; the last one becomes a clean error."""
    for delay in (*RETRY_BACKOFF, None):
        try:
            return attempt()
        except _ANSWERS:
            raise
        except (OSError, TimeoutError) as err:
            if delay is None:
                raise StorageUnavailableError(
                    f"storage request failed after {len(RETRY_BACKOFF) + 1} attempts: {what}: "
                    f"{type(err).__name__}"
                ) from err
            time.sleep(delay)
    raise AssertionError("unreachable")


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
        for listener in _listeners:
            listener(kind, nbytes)

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
        try:
            self.fs, root = url_to_fs(uri, **self.storage_options)
        except ImportError as err:  # the protocol's filesystem package is not installed
            raise missing_filesystem(uri, err) from err
        fast_listing_timestamps(self.fs)
        self.root = root.rstrip("/") if root not in ("/", "") else root
        self.stats = RequestStats()
        self._file_uris: dict[str, str] = {}

    # -- paths -------------------------------------------------------------------------
    def full_path(self, rel: str) -> str:
        if not rel:
            return self.root
        return posixpath.join(self.root, rel) if self.root else rel

    def file_uri(self, rel: str) -> str:
        """The normalised full URI of ``rel``, one for all its aliases (``a//b``, ``a/./b``,
        ``a/x/../b``): the key of the caches of immutable files' contents. The last
        ``FILE_URIS_KEPT`` are kept (every read of a point query asks for one)."""
        uri = self._file_uris.get(rel)
        if uri is None:
            uri = self.fs.unstrip_protocol(posixpath.normpath(self.full_path(rel)))
            if len(self._file_uris) >= FILE_URIS_KEPT:
                self._file_uris.clear()
            self._file_uris[rel] = uri
        return uri

    def child(self, rel: str) -> "Storage":
        """A Storage rooted at ``rel`` that shares this one's filesystem and counters."""
        clone = object.__new__(Storage)
        clone.uri = self.uri.rstrip("/") + "/" + rel
        clone.storage_options = self.storage_options
        clone.fs = self.fs
        clone.root = self.full_path(rel)
        clone.stats = self.stats
        clone._file_uris = {}
        return clone

    # -- counted requests ----------------------------------------------------------------
    def _request(self, kind: str, rel: str, call: Callable[[], T]) -> T:
        def attempt() -> T:
            self.stats.add(kind)
            return call()

        return _retrying(f"{kind} {rel or '/'}", attempt)

    def ls(self, rel: str = "") -> list[dict[str, Any]]:
        """List one directory: entries with ``name`` (base name), ``size`` and ``type``.

        Always asks storage: a filesystem's own listings cache (s3fs keeps listings for the
        life of the instance by default) would hide new instants and files; the table state
        is what caches listings, versioned by the timeline.
        """
        path = self.full_path(rel)
        self.fs.invalidate_cache(path)
        entries = self._request("list", rel, lambda: self.fs.ls(path, detail=True))
        out = []
        for e in entries:
            name = posixpath.basename(e["name"].rstrip("/"))
            out.append({"name": name, "size": e.get("size") or 0, "type": e.get("type", "file")})
        return out

    def ls_names(self, rel: str = "") -> list[str]:
        """The base names in one directory (files and folders alike): one listing request, as
        :meth:`ls`, without the per-entry details (a local listing then stats no entry)."""
        path = self.full_path(rel)
        self.fs.invalidate_cache(path)
        entries = self._request("list", rel, lambda: self.fs.ls(path, detail=False))
        return [posixpath.basename(str(e).rstrip("/")) for e in entries]

    def exists(self, rel: str) -> bool:
        return self._request("info", rel, lambda: self.fs.exists(self.full_path(rel)))

    def info(self, rel: str) -> dict[str, Any]:
        return self._request("info", rel, lambda: self.fs.info(self.full_path(rel)))

    def _read(self, rel: str, call: Callable[[], bytes]) -> bytes:
        data = _retrying(f"read {rel or '/'}", call)
        self.stats.add("read", len(data))
        return data

    def read_bytes(self, rel: str) -> bytes:
        """The whole file: one request. ``start=0`` asks for it as a range, which s3fs sends as
        one GET; without a range s3fs first asks the size (a HEAD) to split large files."""
        return self._read(rel, lambda: self.fs.cat_file(self.full_path(rel), start=0))

    def read_range(self, rel: str, start: int, end: int) -> bytes:
        return self._read(rel, lambda: self.fs.cat_file(self.full_path(rel), start=start, end=end))

    def read_ranges(self, rels: Iterable[str], starts: list[int], ends: list[int | None]) -> list[bytes]:
        names = list(rels)
        paths = [self.full_path(r) for r in names]

        def attempt() -> list[bytes]:
            out = self.fs.cat_ranges(paths, starts, ends)
            for chunk in out:
                if isinstance(chunk, Exception):
                    raise chunk
            return out

        out = _retrying(f"read {', '.join(names[:3])}{' ...' if len(names) > 3 else ''}", attempt)
        for chunk in out:
            self.stats.add("read", len(chunk))
        return out

    def open(self, rel: str, **kwargs: Any):
        """Open a file for reading; reads made through the handle are not counted one by one."""
        return self._request("open", rel, lambda: self.fs.open(self.full_path(rel), "rb", **kwargs))

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
        from fsspec.implementations.local import LocalFileSystem

        if type(self.fs) is LocalFileSystem:  # exactly fsspec's own: a registered subclass stays on fsspec
            return _local_arrow_filesystem()
        return None

    def __getstate__(self) -> dict[str, Any]:
        # fsspec filesystems pickle by their constructor arguments; counters start afresh.
        return {"uri": self.uri, "storage_options": self.storage_options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        type(self).__init__(self, state["uri"], state["storage_options"])


@functools.lru_cache(maxsize=1)
def _local_arrow_filesystem() -> Any:
    """One Arrow ``LocalFileSystem`` for every local read (stateless and thread safe; making one
    per read costs a point query more than its footer lookup)."""
    import pyarrow.fs as pafs

    return pafs.LocalFileSystem()


def open_table_storage(uri: str, storage_options: Mapping[str, Any] | None = None) -> Storage:
    """Resolve ``uri`` and check it holds a Hudi table."""
    try:
        storage = Storage(uri, storage_options)
    except NotInstalledError:
        raise
    except (ValueError, ImportError) as err:
        raise TableNotFoundError(f"cannot resolve storage for {uri!r}: {err}") from err
    return storage


__all__ = [
    "FILE_URIS_KEPT",
    "RequestListener",
    "RequestStats",
    "Storage",
    "add_request_listener",
    "open_table_storage",
    "remove_request_listener",
]
