"""Storage confinement: which URIs a client may register, and with which storage options.

``register-table`` comes from the network, and an fsspec URL can reach anything: another
file on the server's disk (``reference://``), a folder the client may write into (chained
caching filesystems, ``simplecache::...``), or any host (``http://``, ``ftp://``, a client-chosen
S3 endpoint). The :class:`StoragePolicy` admits a URI only when

* it uses an allowed protocol (default: local files and the object stores),
* it is not chained (``a::b``) and has no ``..`` segment,
* it lies under an allowed root (every warehouse plus ``allowed_roots``), after normalisation
  (and, for local paths, after resolving symbolic links);

and it admits client ``storage_options`` only for keys the operator named. Local paths are
resolved (symbolic links) once per path and kept in a small cache, bounded in bytes, which
:meth:`StoragePolicy.forget` empties (catalog changes and ``refresh-table`` call it): every open
of a table re-checks its row, and resolving its path each time cost a point query more than
planning it. Only the resolution is kept; the decision is taken again on every check. Credentials come
from the server's config per root (``root_storage_options``) and are never stored in the
catalog: the registry keeps only the admitted client keys.

Namespaces are walls (``namespace_roots``: namespace -> its roots, which are allowed roots too):
a table of a namespace with roots of its own lies under them, whoever registers it, and is
refused when opened otherwise; an admin of one namespace (not of the catalog) registers only in
a namespace with roots of its own, so never at a folder of another namespace (the roots of two
namespaces may not overlap).
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from catalog.errors import InvalidQueryError
from catalog.lru import BoundedLRU
from flight_server.server.errors import ServerError
from flight_server.server.registry import parse_identifier

DEFAULT_PROTOCOLS: tuple[str, ...] = ("file", "s3", "s3a", "gs", "gcs", "abfs", "abfss", "az")
#: protocols that never reach storage the operator chose, whatever the configuration says
FORBIDDEN_PROTOCOLS = frozenset(
    {
        "reference", "simplecache", "filecache", "blockcache", "cached", "http", "https", "ftp", "sftp",
        "ssh", "smb", "webhdfs", "memory", "github", "git", "zip", "tar", "libarchive", "dask", "data",
    }
)  # fmt: skip


#: local path resolutions kept (a path and its resolution, about 200 bytes each)
DEFAULT_RESOLVED_CACHE_BYTES = 1 << 20
_RESOLVED_OVERHEAD = 100


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


def parse_location(
    uri: str, what: str = "uri", resolve: bool = True, realpath: Callable[[str], str] = os.path.realpath
) -> Location:
    """Split and normalise ``uri``; refuse chained URLs, ``..`` segments and relative paths.

    ``realpath`` resolves a local path (``resolve``), e.g. through a cache.

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
        path = realpath(path) if resolve else posixpath.normpath(path)
        return Location("file", path.rstrip("/") or "/")
    path = posixpath.normpath("/" + path).lstrip("/")
    return Location(canonical, "" if path == "." else path.rstrip("/"))


def _check_disjoint(namespace_roots: Mapping[str, list[Location]]) -> None:
    """Raises: ValueError when a root of one namespace lies within (or holds) another's."""
    owned = [(ns, root) for ns, roots in namespace_roots.items() for root in roots]
    for i, (ns, root) in enumerate(owned):
        for other_ns, other in owned[i + 1:]:
            if other_ns != ns and (root.within(other) or other.within(root)):
                raise ValueError(f"namespace_roots of {ns} and {other_ns} overlap ({root.uri()}, {other.uri()})")


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
        namespace_roots: the roots of each namespace that has roots of its own.
        resolved_cache_bytes: the bound of the local path resolutions kept (0: resolve every time).

    Raises:
        ValueError: the roots of two namespaces overlap.
    """

    roots: list[str] = field(default_factory=list)
    protocols: Iterable[str] = DEFAULT_PROTOCOLS
    client_option_keys: Iterable[str] = ()
    root_storage_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    namespace_roots: Mapping[str, Iterable[str]] = field(default_factory=dict)
    resolved_cache_bytes: int = DEFAULT_RESOLVED_CACHE_BYTES

    def __post_init__(self) -> None:
        self._resolved: BoundedLRU[str, str] = BoundedLRU("resolved_paths", self.resolved_cache_bytes)
        self._protocols = {_ALIASES.get(p.lower(), p.lower()) for p in self.protocols} - FORBIDDEN_PROTOCOLS
        self._keys = frozenset(self.client_option_keys)
        self._namespace_roots = {
            ns: [parse_location(_absolute(r), f"namespace root of {ns}") for r in roots]
            for ns, roots in self.namespace_roots.items()
        }
        _check_disjoint(self._namespace_roots)
        own = [root for roots in self._namespace_roots.values() for root in roots]
        self._roots = [parse_location(_absolute(r), "allowed root") for r in self.roots] + own
        self._root_options = [
            (parse_location(r, "storage options root"), dict(o)) for r, o in self.root_storage_options.items()
        ]

    def check(self, uri: str, client_options: Mapping[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """The normalised URI and the client options to store, or :class:`StoragePolicyError`."""
        loc = parse_location(uri, realpath=self._realpath)
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

    def check_in_namespace(
        self, namespace: str, uri: str, client_options: Mapping[str, Any] | None, catalog_admin: bool
    ) -> tuple[str, dict[str, Any]]:
        """:meth:`check` for a table of ``namespace`` registered by a caller who is an admin of
        the whole catalog (``catalog_admin``) or of that namespace only.

        Raises:
            StoragePolicyError: the URI is not allowed, or not under the namespace's own roots.
        """
        normalised, options = self.check(uri, client_options)
        roots = self._namespace_roots.get(namespace)
        if roots is None:
            if not catalog_admin:
                raise StoragePolicyError(
                    f"namespace {namespace} has no roots of its own (namespace_roots): only a catalog admin "
                    "registers tables in it"
                )
        elif not any(parse_location(normalised, realpath=self._realpath).within(root) for root in roots):
            raise StoragePolicyError(f"uri is not under a root of namespace {namespace} (see namespace_roots)")
        return normalised, options

    def check_registered(self, identifier: str, uri: str, stored: Mapping[str, Any] | None) -> None:
        """Re-check a catalog row when its table is opened: rows written before the confinement
        (or before the roots changed) are refused, not read.

        Raises:
            StoragePolicyError: naming the table, not its location.
        """
        try:
            self.check_in_namespace(parse_identifier(identifier)[0], uri, stored, catalog_admin=True)
        except StoragePolicyError as err:
            raise StoragePolicyError(
                f"table {identifier} is registered at a location or with storage options this server does "
                f"not allow ({str(err).split(':')[0]}); an admin must register it again"
            ) from None

    def _realpath(self, path: str) -> str:
        """``os.path.realpath`` of a local path, kept until :meth:`forget`."""
        resolved = self._resolved.get(path)
        if resolved is None:
            resolved = os.path.realpath(path)
            self._resolved.put(path, resolved, len(path) + len(resolved) + _RESOLVED_OVERHEAD)
        return resolved

    def forget(self) -> None:
        """Drop the kept path resolutions (a symbolic link may have been moved): after a catalog
        change or an operator's ``refresh-table``."""
        self._resolved.clear()

    def root_options(self, uri: str) -> dict[str, Any]:
        """The server's storage options for ``uri`` (the longest matching root wins)."""
        try:
            loc = parse_location(uri, realpath=self._realpath)
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


__all__ = ["DEFAULT_PROTOCOLS", "DEFAULT_RESOLVED_CACHE_BYTES", "StoragePolicy", "StoragePolicyError", "parse_location"]
