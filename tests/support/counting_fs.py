"""fsspec filesystems for tests: one that records every request with its path, one that fails.

``countfs:///abs/path`` is the local file ``/abs/path``; each ``ls``/``info``/``cat_file``/open
is recorded in :data:`CountingFileSystem.calls` as ``(kind, path)``. ``flakyfs://`` is the same
files, but the next :attr:`FlakyFileSystem.failures` requests raise ``ConnectionResetError``
(a transient failure); ``failures = -1`` makes every request fail.
"""

from __future__ import annotations

import threading

import fsspec
from fsspec.implementations.local import LocalFileSystem

_inside = threading.local()


class CountingFileSystem(LocalFileSystem):
    """Records outer requests only (LocalFileSystem's ``ls`` calls ``info`` itself)."""

    protocol = ("countfs",)
    calls: list[tuple[str, str]] = []
    _lock = threading.Lock()

    @classmethod
    def _strip_protocol(cls, path):
        path = str(path)
        for proto in ("countfs://", "flakyfs://"):
            if path.startswith(proto):
                path = path[len(proto) :]
        return super()._strip_protocol(path)

    def unstrip_protocol(self, name: str) -> str:
        return f"{self.protocol[0]}://{name}"

    def _record(self, kind: str, path: str) -> None:
        with self._lock:
            type(self).calls.append((kind, self._strip_protocol(path)))

    def _outer(self, kind: str, path, call):
        if getattr(_inside, "depth", 0):
            return call()
        self._record(kind, path)
        _inside.depth = 1
        try:
            return call()
        finally:
            _inside.depth = 0

    def ls(self, path, detail=False, **kwargs):
        return self._outer("list", path, lambda: super(CountingFileSystem, self).ls(path, detail=detail, **kwargs))

    def info(self, path, **kwargs):
        return self._outer("info", path, lambda: super(CountingFileSystem, self).info(path, **kwargs))

    def cat_file(self, path, start=None, end=None, **kwargs):
        return self._outer(
            "read", path, lambda: super(CountingFileSystem, self).cat_file(path, start=start, end=end, **kwargs)
        )

    def _open(self, path, mode="rb", **kwargs):
        return self._outer("open", path, lambda: super(CountingFileSystem, self)._open(path, mode=mode, **kwargs))

    @classmethod
    def reset(cls) -> list[tuple[str, str]]:
        """The calls so far (and forget them)."""
        with cls._lock:
            out, cls.calls[:] = list(cls.calls), []
            return out


class FlakyFileSystem(CountingFileSystem):
    protocol = ("flakyfs",)
    calls: list[tuple[str, str]] = []
    failures = 0

    def _record(self, kind: str, path: str) -> None:
        super()._record(kind, path)
        with self._lock:
            cls = type(self)
            if cls.failures == 0:
                return
            if cls.failures > 0:
                cls.failures -= 1
        raise ConnectionResetError(f"injected transient failure on {kind}")


def register() -> None:
    """Make ``countfs://`` and ``flakyfs://`` known to fsspec (idempotent)."""
    fsspec.register_implementation("countfs", CountingFileSystem, clobber=True)
    fsspec.register_implementation("flakyfs", FlakyFileSystem, clobber=True)


__all__ = ["CountingFileSystem", "FlakyFileSystem", "register"]
