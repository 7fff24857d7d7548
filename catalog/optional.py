"""Optional dependencies: ``pip install hudi-flight`` brings the reader only (pyarrow, fastavro,
fsspec); the server, the clients and the storage backends come with extras. Importing
a part whose extra is missing fails with :class:`NotInstalledError` naming the extra."""

from __future__ import annotations

import contextlib
import importlib.util
from typing import Iterator

#: top-level packages of this distribution: a missing one is a broken install, not an extra
_OWN_PACKAGES = frozenset({"catalog", "flight_server", "schemas", "hudi_generator"})


class NotInstalledError(ModuleNotFoundError):
    """A module of an optional extra is not installed; the message says which extra brings it."""


@contextlib.contextmanager
def optional_dependency(extra: str, what: str) -> Iterator[None]:
    """Imports in the block belong to the extra ``extra`` (for ``what``, e.g. "the Polars source");
    a missing module becomes a :class:`NotInstalledError` naming the extra to install."""
    try:
        yield
    except NotInstalledError:
        raise
    except ModuleNotFoundError as err:
        package = (err.name or "").partition(".")[0]
        if not package or package in _OWN_PACKAGES:
            raise
        raise NotInstalledError(_message(what, package, extra), name=err.name) from err


def _message(what: str, package: str, extra: str) -> str:
    return f"{what} needs the Python package {package!r}, which is not installed: pip install 'hudi-flight[{extra}]'"


def check_installed(extra: str, what: str, *modules: str) -> None:
    """Raise :class:`NotInstalledError` unless every one of ``modules`` can be imported (found,
    not imported: a package's import-time check stays cheap)."""
    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:  # its parent package is missing
            found = False
        if not found:
            raise NotInstalledError(_message(what, module.partition(".")[0], extra), name=module)


#: fsspec protocols whose filesystem package an extra of this distribution brings
FILESYSTEM_EXTRAS = {"s3": ("s3fs", "s3"), "s3a": ("s3fs", "s3")}


def missing_filesystem(uri: str, err: ImportError) -> ImportError:
    """The error for a URI whose fsspec filesystem is not installed: :class:`NotInstalledError`
    naming the extra when one brings it, else fsspec's own ``ImportError`` (which names the package)."""
    protocol = uri.partition("://")[0].lower() if "://" in uri else ""
    if protocol not in FILESYSTEM_EXTRAS:
        return err
    package, extra = FILESYSTEM_EXTRAS[protocol]
    return NotInstalledError(_message(f"reading {protocol}:// URLs", package, extra), name=package)


__all__ = ["FILESYSTEM_EXTRAS", "NotInstalledError", "check_installed", "missing_filesystem", "optional_dependency"]
