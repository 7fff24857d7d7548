"""Flight SQL object names -> registered tables: catalog ``hudi``, db schema = namespace, the
read-optimized view ``<table>_ro`` of every merge-on-read table (as Hive sync names it), and the
metadata tables ``<table>$<name>`` of every table (``catalog.meta``; Trino's Hudi connector names
``$timeline`` so). A registered table of that name wins over a metadata table."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Iterator

import pyarrow.flight as flight

from catalog.errors import UnknownTableError, shown
from catalog.meta import META_TABLES, SEPARATOR
from catalog.plan.options import ReadOptions
from flight_server.protocol.wire import RO_SUFFIX
from flight_server.server.query.queries import Call
from flight_server.server.registry import TableEntry
from flight_server.server.sql.hints import listed

CATALOG = "hudi"


@dataclass(frozen=True)
class Reference:
    """A resolved name: the registered table and the query type the name asks for, or the
    metadata table of it the name asks for (``meta``)."""

    entry: TableEntry
    options: ReadOptions
    meta: str | None = None

    @property
    def identifier(self) -> str:
        """The registered table's identifier (its metadata tables are authorized like it)."""
        return self.entry.identifier

    @property
    def name(self) -> str:
        """The identifier of what the name reads: ``ns.t``, or ``ns.t$timeline``."""
        return self.identifier + SEPARATOR + self.meta if self.meta else self.identifier


def meta_name(name: str) -> tuple[str, str] | None:
    """``(table name, metadata table)`` of a name ``t$timeline`` (``None``: no such form)."""
    base, separator, kind = name.rpartition(SEPARATOR)
    if not separator or not base or kind.lower() not in META_TABLES:
        return None
    return base, kind.lower()


def meta_reference(call: Call, identifier: str) -> Reference | None:
    """The metadata table an identifier :attr:`Reference.name` made reads (``None``: a
    registered table, as the resolver prefers it, or no metadata table name)."""
    namespace, _, name = identifier.partition(".")
    meta = meta_name(name)
    if meta is None:
        return None
    registered = {e.name: e for e in call.entries(namespace)}
    if name in registered or meta[0] not in registered:
        return None
    return Reference(registered[meta[0]], ReadOptions(), meta[1])


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
        meta = meta_name(name)
        if name in registered:
            found.append(Reference(registered[name], ReadOptions()))
        elif meta is not None and meta[0] in registered:
            found.append(Reference(registered[meta[0]], ReadOptions(), meta[1]))
        elif name.endswith(RO_SUFFIX) and name[: -len(RO_SUFFIX)] in registered:
            entry = registered[name[: -len(RO_SUFFIX)]]
            if call.open_entry(entry).state.config.is_mor:
                found.append(Reference(entry, ReadOptions(query_type="read_optimized")))
    if not found:
        raise UnknownTableError(f"table {written} not found{_names_hint(call, namespace, name)}")
    if len(found) > 1:
        raise UnknownTableError(f"table name {written} is ambiguous: qualify it with its namespace")
    return found[0]


@contextlib.contextmanager
def hinted_unknown(call: Call, identifier: str) -> Iterator[None]:
    """Tell a table the block does not find as :func:`resolve_name` does: with the names the
    caller could have meant (the registry's own words name no alternative)."""
    try:
        yield
    except UnknownTableError:
        namespace, _, name = identifier.rpartition(".")
        hint = _names_hint(call, namespace or None, name)
        raise UnknownTableError(f"table {shown_name(None, namespace or None, name)} not found{hint}") from None


def _names_hint(call: Call, namespace: str | None, name: str) -> str:
    """What a caller who named a missing table could have meant, among the tables it may read
    (as the CLI tells it): the metadata tables of ``t`` for ``t$wrong``, the tables of the
    namespace, or the namespaces."""
    readable = call.readable([e.identifier for e in call.entries()])
    namespaces = sorted({identifier.partition(".")[0] for identifier in readable})
    if namespace is None:
        return f" (namespaces: {listed(namespaces)})"
    if namespace not in namespaces:
        return f": no namespace {shown(namespace)} (namespaces: {listed(namespaces)})"
    tables = sorted(identifier.partition(".")[2] for identifier in readable if identifier.startswith(namespace + "."))
    base, separator, _ = name.rpartition(SEPARATOR)
    if separator and base in tables:
        metas = [f"{base}{SEPARATOR}{kind}" for kind in META_TABLES]
        return f" (metadata tables of {namespace}.{base}: {listed(metas)})"
    return f" (tables of {namespace}: {listed(tables)})"


def readable_name(call: Call, catalog: str | None, namespace: str | None, name: str) -> Reference:
    """The table a name resolves to, once the caller may read it.

    Existence is revealed only to a caller who may read the name: a table the caller may not
    read and a missing one get the same UNAUTHORIZED answer (as on the JSON path, which
    authorizes before it opens), and ``t_ro`` tells nobody without the right whether ``t`` is
    merge-on-read. An unqualified name is looked up among readable tables only.

    Raises:
        flight.FlightUnauthorizedError: the caller may not read the name (whether it exists or not).
        UnknownTableError: no such table, told to a caller who could read it.
    """
    written = shown_name(catalog, namespace, name)
    try:
        ref = resolve_name(call, catalog, namespace, name, only_readable=True)
    except UnknownTableError:
        if namespace and (catalog is None or catalog.lower() == CATALOG):
            _authorize(call, f"{namespace}.{name}", written)
        raise
    _authorize(call, ref.identifier, written)
    return ref


def _authorize(call: Call, identifier: str, written: str) -> None:
    try:
        call.authorize("read", identifier)
    except flight.FlightUnauthorizedError:
        raise flight.FlightUnauthorizedError(f"no read right on table {written}") from None


__all__ = [
    "CATALOG", "RO_SUFFIX", "Reference", "hinted_unknown", "meta_name",
    "meta_reference", "readable_name", "resolve_name", "shown_name",
]
