"""Flight SQL object names -> registered tables: catalog ``hudi``, db schema = namespace, and the
read-optimized view ``<table>_ro`` of every merge-on-read table (as Hive sync names it)."""

from __future__ import annotations

from dataclasses import dataclass

from catalog.errors import UnknownTableError, shown
from catalog.plan.options import ReadOptions
from flight_server.server.query.queries import Call
from flight_server.server.registry import TableEntry

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


def shown_name(catalog: str | None, namespace: str | None, name: str) -> str:
    """A name as the caller wrote it, cut short for messages."""
    return ".".join(shown(p) for p in (catalog, namespace, name) if p)


def resolve_name(
    call: Call, catalog: str | None, namespace: str | None, name: str, only_readable: bool = False
) -> Reference:
    """The table ``[catalog.][namespace.]name`` names (``name_ro``: the read-optimized view of a
    merge-on-read table; an unqualified name must be unique across namespaces).

    ``only_readable``: an unqualified name is looked up among the tables the caller may read
    only, so it never reveals (not even as ambiguous) a table the caller may not read.

    Raises:
        UnknownTableError: no such table (NOT_FOUND).
    """
    written = shown_name(catalog, namespace, name)
    if catalog is not None and catalog.lower() != CATALOG:
        raise UnknownTableError(f"table {written} not found: the only catalog is {CATALOG!r}")
    candidates = [namespace] if namespace else sorted({e.namespace for e in call.entries()})
    found: list[Reference] = []
    for ns in candidates:
        entries = call.entries(ns)
        if only_readable and not namespace:
            allowed = set(call.readable([e.identifier for e in entries]))
            entries = [e for e in entries if e.identifier in allowed]
        registered = {e.name: e for e in entries}
        if name in registered:
            found.append(Reference(registered[name], ReadOptions()))
        elif name.endswith(RO_SUFFIX) and name[: -len(RO_SUFFIX)] in registered:
            entry = registered[name[: -len(RO_SUFFIX)]]
            if call.open_entry(entry).state.config.is_mor:
                found.append(Reference(entry, ReadOptions(query_type="read_optimized")))
    if not found:
        raise UnknownTableError(f"table {written} not found")
    if len(found) > 1:
        raise UnknownTableError(f"table name {written} is ambiguous: qualify it with its namespace")
    return found[0]


__all__ = ["CATALOG", "RO_SUFFIX", "Reference", "resolve_name", "shown_name"]
