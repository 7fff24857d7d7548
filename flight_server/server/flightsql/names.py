"""Flight SQL object names -> registered tables: catalog ``hudi``, db schema = namespace, and the
read-optimized view ``<table>_ro`` of every merge-on-read table (as Hive sync names it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from catalog.errors import UnknownTableError
from catalog.plan.options import ReadOptions
from flight_server.server.registry import TableEntry

#: the HudiFlightServer (not imported: the service imports this package)
Server = Any

CATALOG = "hudi"
RO_SUFFIX = "_ro"


@dataclass(frozen=True)
class Reference:
    """A resolved name: the registered table and the query type the name asks for."""

    entry: TableEntry
    options: ReadOptions

    @property
    def identifier(self) -> str:
        return self.entry.identifier


def _shown(text: str) -> str:
    return text if len(text) <= 64 and text.isprintable() else text[:64] + "..."


def shown_name(catalog: str | None, namespace: str | None, name: str) -> str:
    """A name as the caller wrote it, cut short for messages."""
    return ".".join(_shown(p) for p in (catalog, namespace, name) if p)


def resolve_name(
    server: Server,
    catalog: str | None,
    namespace: str | None,
    name: str,
    readable: Callable[[list[str]], list[str]] | None = None,
) -> Reference:
    """The table ``[catalog.][namespace.]name`` names (``name_ro``: the read-optimized view of a
    merge-on-read table; an unqualified name must be unique across namespaces).

    Args:
        readable: the subset of identifiers the caller may read; an unqualified name is then
            looked up among those only (so it never reveals, not even as ambiguous, a table the
            caller may not read).

    Raises:
        UnknownTableError: no such table (NOT_FOUND).
    """
    shown = shown_name(catalog, namespace, name)
    if catalog is not None and catalog.lower() != CATALOG:
        raise UnknownTableError(f"table {shown} not found: the only catalog is {CATALOG!r}")
    candidates = [namespace] if namespace else sorted({e.namespace for e in server.registry.list_tables()})
    found: list[Reference] = []
    for ns in candidates:
        entries = server.registry.list_tables(ns)
        if readable is not None and not namespace:
            allowed = set(readable([e.identifier for e in entries]))
            entries = [e for e in entries if e.identifier in allowed]
        registered = {e.name: e for e in entries}
        if name in registered:
            found.append(Reference(registered[name], ReadOptions()))
        elif name.endswith(RO_SUFFIX) and name[: -len(RO_SUFFIX)] in registered:
            entry = registered[name[: -len(RO_SUFFIX)]]
            if server.tables.get(entry).config.is_mor:
                found.append(Reference(entry, ReadOptions(query_type="read_optimized")))
    if not found:
        raise UnknownTableError(f"table {shown} not found")
    if len(found) > 1:
        raise UnknownTableError(f"table name {shown} is ambiguous: qualify it with its namespace")
    return found[0]


__all__ = ["CATALOG", "RO_SUFFIX", "Reference", "Server", "resolve_name", "shown_name"]
