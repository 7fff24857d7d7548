"""Storage confinement: which URIs a client may register, and with which storage options.

``register-table`` comes from the network, and an fsspec URL can reach anything: another
file on the server's disk (``reference://``), a folder the client may write into (chained
caching filesystems, ``simplecache::...``), or any host (``http://``, ``ftp://``, a client-chosen
S3 endpoint). The :class:`StoragePolicy` admits a URI only when

* it uses an allowed protocol (default: local files and the object stores),
* it is not chained (``a::b``) and has no ``..`` segment,
* it lies under an allowed root (every warehouse plus ``allowed_roots``), after normalisation
  (and, for local paths, after resolving symbolic links);

and it admits client ``storage_options`` only for keys the operator named. Credentials come
from the server's config per root (``root_storage_options``) and are never stored in the
catalog: the registry keeps only the admitted client keys.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from catalog.errors import InvalidQueryError
from flight_server.server.errors import ServerError

DEFAULT_PROTOCOLS: tuple[str, ...] = ("file", "s3", "s3a", "gs", "gcs", "abfs", "abfss", "az")
#: protocols that never reach storage the operator chose, whatever the configuration says
FORBIDDEN_PROTOCOLS = frozenset(
    {
        "reference", "simplecache", "filecache", "blockcache", "cached", "http", "https", "ftp", "sftp",
        "ssh", "smb", "webhdfs", "memory", "github", "git", "zip", "tar", "libarchive", "dask", "data",
    }
)  # fmt: skip


class StoragePolicyError(ServerError, InvalidQueryError):
    """A URI or storage option the server does not allow (INVALID_ARGUMENT)."""


@dataclass(frozen=True)
class Location:
    """A URI split into a lower-case protocol and a normalised path (no trailing slash)."""

    protocol: str
    path: str

    def within(self, root: "Location") -> bool:
        if self.protocol != root.protocol:
            return False
        return root.path in ("", "/") or self.path == root.path or self.path.startswith(root.path + "/")

    def uri(self) -> str:
        return self.path if self.protocol == "file" else f"{self.protocol}://{self.path}"


_ALIASES = {"local": "file", "s3a": "s3", "gcs": "gs", "abfss": "abfs", "az": "abfs"}


def parse_location(uri: str, what: str = "uri", resolve: bool = True) -> Location:
    """Split and normalise ``uri``; refuse chained URLs, ``..`` segments and relative paths.

    Raises:
        StoragePolicyError: the URI cannot be confined.
    """
    if not isinstance(uri, str) or not uri or "\x00" in uri:
        raise StoragePolicyError(f"{what} must be a non-empty string")
    if "::" in uri:
        raise StoragePolicyError(f"{what}: chained URLs ('::') are not allowed")
    if "://" in uri:
        protocol, _, path = uri.partition("://")
    elif ":" in uri.split("/", 1)[0] and not uri.startswith("/"):
        protocol, _, path = uri.partition(":")  # e.g. "file:/x", "memory:x"
    else:
        protocol, path = "file", uri
    protocol = protocol.lower()
    if protocol in FORBIDDEN_PROTOCOLS:
        raise StoragePolicyError(f"{what}: protocol {protocol!r} is not allowed")
    if ".." in path.replace("\\", "/").split("/"):
        raise StoragePolicyError(f"{what}: '..' segments are not allowed")
    canonical = _ALIASES.get(protocol, protocol)
    if canonical == "file":
        if not path.startswith("/"):
            raise StoragePolicyError(f"{what}: local paths must be absolute")
        path = os.path.realpath(path) if resolve else posixpath.normpath(path)
        return Location("file", path.rstrip("/") or "/")
    path = posixpath.normpath("/" + path).lstrip("/")
    return Location(canonical, "" if path == "." else path.rstrip("/"))


def _absolute(root: str) -> str:
    """An operator's relative local root is relative to the server's working directory."""
    return os.path.abspath(root) if "://" not in root and ":" not in root.split("/", 1)[0] else root


@dataclass
class StoragePolicy:
    """What ``register-table`` may reach.

    Args:
        roots: URIs under which tables may be registered (warehouses are roots too).
        protocols: allowed fsspec protocols (aliases such as ``s3a``/``s3`` count as one).
        client_option_keys: ``storage_options`` keys a client may send (non-secret ones).
        root_storage_options: storage options of the server per root URI (credentials).
    """

    roots: list[str] = field(default_factory=list)
    protocols: Iterable[str] = DEFAULT_PROTOCOLS
    client_option_keys: Iterable[str] = ()
    root_storage_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._protocols = {_ALIASES.get(p.lower(), p.lower()) for p in self.protocols} - FORBIDDEN_PROTOCOLS
        self._keys = frozenset(self.client_option_keys)
        self._roots = [parse_location(_absolute(r), "allowed root") for r in self.roots]
        self._root_options = [
            (parse_location(r, "storage options root"), dict(o)) for r, o in self.root_storage_options.items()
        ]

    def check(self, uri: str, client_options: Mapping[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """The normalised URI and the client options to store, or :class:`StoragePolicyError`."""
        loc = parse_location(uri)
        if loc.protocol not in self._protocols:
            raise StoragePolicyError(f"uri: protocol {loc.protocol!r} is not allowed on this server")
        if not any(loc.within(root) for root in self._roots):
            raise StoragePolicyError("uri is not under a root this server allows (see allowed_roots)")
        options = dict(client_options or {})
        refused = sorted(k for k in options if k not in self._keys)
        if refused:
            raise StoragePolicyError(
                f"storage_options keys not allowed from clients: {', '.join(map(str, refused))[:200]}"
                " (the server configures storage credentials per root; see client_storage_option_keys)"
            )
        return loc.uri(), options

    def check_registered(self, identifier: str, uri: str, stored: Mapping[str, Any] | None) -> None:
        """Re-check a catalog row when its table is opened: rows written before the confinement
        (or before the roots changed) are refused, not read.

        Raises:
            StoragePolicyError: naming the table, not its location.
        """
        try:
            self.check(uri, stored)
        except StoragePolicyError as err:
            raise StoragePolicyError(
                f"table {identifier} is registered at a location or with storage options this server does "
                f"not allow ({str(err).split(':')[0]}); an admin must register it again"
            ) from None

    def root_options(self, uri: str) -> dict[str, Any]:
        """The server's storage options for ``uri`` (the longest matching root wins)."""
        try:
            loc = parse_location(uri)
        except StoragePolicyError:
            return {}
        best: tuple[int, dict[str, Any]] = (-1, {})
        for root, options in self._root_options:
            if loc.within(root) and len(root.path) > best[0]:
                best = (len(root.path), options)
        return dict(best[1])

    def options_for(self, uri: str, stored: Mapping[str, Any] | None) -> dict[str, Any]:
        """Storage options to open ``uri`` with: the root's, then the stored (admitted) ones."""
        return {**self.root_options(uri), **dict(stored or {})}


__all__ = ["DEFAULT_PROTOCOLS", "StoragePolicy", "StoragePolicyError", "parse_location"]
