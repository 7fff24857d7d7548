"""The catalog registry: namespaces and tables, persisted through SQLAlchemy.

Embedded SQLite by default; any SQLAlchemy URL works (PostgreSQL is tested). Each operation
runs in its own transaction, so several server processes can share one database.

Warehouse discovery registers every folder under a warehouse URI that holds
``.hoodie/hoodie.properties`` as ``<parent folder name>.<folder name>`` and remembers the
warehouse it came from, so a re-scan also drops tables whose folder disappeared.
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Mapping

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from catalog.errors import InvalidQueryError, TableAlreadyExistsError, UnknownTableError
from catalog.meta.redact import redacted
from catalog.storage import Storage

log = logging.getLogger(__name__)

_meta = sa.MetaData()
namespaces_table = sa.Table(
    "hudi_flight_namespaces",
    _meta,
    sa.Column("name", sa.String(255), primary_key=True),
    sa.Column("properties", sa.Text, nullable=False, default="{}"),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)
tables_table = sa.Table(
    "hudi_flight_tables",
    _meta,
    sa.Column("namespace", sa.String(255), sa.ForeignKey("hudi_flight_namespaces.name"), primary_key=True),
    sa.Column("name", sa.String(255), primary_key=True),
    sa.Column("base_uri", sa.Text, nullable=False),
    sa.Column("storage_options", sa.Text, nullable=False, default="{}"),
    sa.Column("properties", sa.Text, nullable=False, default="{}"),
    sa.Column("registered_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("warehouse", sa.Text, nullable=True),  # set for tables found by discovery
)


#: characters of a namespace or of a table name (the catalog's columns hold 255)
MAX_NAME_CHARS = 255
#: the characters of a namespace or table name entering the catalog (docs/flight.md, "Actions")
NAME_CHARACTERS = "ASCII letters, digits, '_', '-' and '$'"
_NAME = re.compile(r"[A-Za-z0-9_$-]+")


def parse_identifier(identifier: str) -> tuple[str, str]:
    """``"ns.table"`` -> ``("ns", "table")``.

    Raises:
        InvalidQueryError: not of the form ``namespace.table``.
    """
    ns, dot, name = identifier.partition(".")
    if not dot or not ns or not name or "." in name or any(c.isspace() for c in identifier):
        raise InvalidQueryError(f"table name {identifier!r} is not of the form 'namespace.table'")
    return ns, name


def check_new_identifier(identifier: str) -> tuple[str, str]:
    """:func:`parse_identifier` of a name about to enter the catalog (registered, discovered):
    each part at most ``MAX_NAME_CHARS`` characters, all of :data:`NAME_CHARACTERS` (so no
    control character such as NUL, no bidirectional control such as U+202E and no look-alike
    such as a Cyrillic ``а`` can make a name read as another). ``$`` is kept: a table registered
    as ``t$timeline`` is served under that name ahead of ``t``'s metadata table.

    Raises:
        InvalidQueryError: a malformed or unacceptable name.
    """
    ns, name = parse_identifier(identifier)
    if len(ns) > MAX_NAME_CHARS or len(name) > MAX_NAME_CHARS:
        raise InvalidQueryError(
            f"table name {identifier[:64]!r}... is too long: a namespace or table name has at most "
            f"{MAX_NAME_CHARS} characters (MAX_NAME_CHARS)"
        )
    if not (_NAME.fullmatch(ns) and _NAME.fullmatch(name)):
        shown = identifier[:64].encode("ascii", "backslashreplace").decode()
        raise InvalidQueryError(
            f"table name '{shown}' holds a character outside NAME_CHARACTERS ({NAME_CHARACTERS})"
        )
    return ns, name


@dataclass(frozen=True)
class TableEntry:
    """One registered table."""

    namespace: str
    name: str
    base_uri: str
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    properties: Mapping[str, str] = field(default_factory=dict)
    registered_at: datetime | None = None
    warehouse: str | None = None

    @property
    def identifier(self) -> str:
        return f"{self.namespace}.{self.name}"

    def to_json(self) -> dict[str, Any]:
        """Public description (storage options are left out and secret-looking properties
        redacted: they may hold credentials)."""
        return {
            "table": self.identifier,
            "namespace": self.namespace,
            "name": self.name,
            "uri": self.base_uri,
            "properties": redacted(self.properties),
            "registered_at": self.registered_at.isoformat() if self.registered_at else None,
            "warehouse": self.warehouse,
        }


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _row_to_entry(row: Any) -> TableEntry:
    registered = row.registered_at
    if registered is not None and registered.tzinfo is None:  # SQLite drops the zone
        registered = registered.replace(tzinfo=timezone.utc)
    return TableEntry(
        row.namespace,
        row.name,
        row.base_uri,
        json.loads(row.storage_options or "{}"),
        json.loads(row.properties or "{}"),
        registered,
        row.warehouse,
    )


class Registry:
    """Namespaces and tables in a SQL database.

    Args:
        url: a SQLAlchemy URL, e.g. ``sqlite:///catalog.db`` or ``postgresql://...``.
        engine_kwargs: passed to :func:`sqlalchemy.create_engine`.
    """

    def __init__(self, url: str = "sqlite://", **engine_kwargs: Any):
        try:
            parsed_url = sa.engine.make_url(url)
            if parsed_url.get_backend_name() == "sqlite" and parsed_url.database in (None, "", ":memory:"):
                # One in-memory database shared by every thread (each connection would get its own).
                engine_kwargs.setdefault("poolclass", sa.pool.StaticPool)
                engine_kwargs.setdefault("connect_args", {"check_same_thread": False})
            self.engine = sa.create_engine(url, **engine_kwargs)
        except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError, ImportError) as err:
            raise ValueError(f"cannot open catalog database {url!r}: {err}") from err
        _meta.create_all(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    # -- namespaces ---------------------------------------------------------------------
    def _ensure_namespace(self, conn: sa.Connection, namespace: str) -> None:
        found = conn.execute(sa.select(namespaces_table.c.name).where(namespaces_table.c.name == namespace)).first()
        if found is None:
            conn.execute(namespaces_table.insert().values(name=namespace, properties="{}", created_at=_now()))

    def list_namespaces(self) -> list[str]:
        with self.engine.connect() as conn:
            return [r[0] for r in conn.execute(sa.select(namespaces_table.c.name).order_by(namespaces_table.c.name))]

    # -- tables -------------------------------------------------------------------------
    def register_table(
        self,
        identifier: str,
        uri: str,
        storage_options: Mapping[str, Any] | None = None,
        properties: Mapping[str, str] | None = None,
        replace: bool = False,
        warehouse: str | None = None,
    ) -> TableEntry:
        """Register ``uri`` as ``identifier`` (the namespace is created when missing).

        Registering the same URI again is a no-op; another URI under a taken name needs
        ``replace=True``.

        Raises:
            InvalidQueryError: malformed or unacceptable identifier (:func:`check_new_identifier`).
            TableAlreadyExistsError: the name is taken by another URI and ``replace`` is false.
        """
        ns, name = check_new_identifier(identifier)
        values = {
            "base_uri": uri,
            "storage_options": json.dumps(dict(storage_options or {}), sort_keys=True),
            "properties": json.dumps(dict(properties or {}), sort_keys=True),
            "warehouse": warehouse,
        }
        key = (tables_table.c.namespace == ns) & (tables_table.c.name == name)
        try:
            with self.engine.begin() as conn:
                self._ensure_namespace(conn, ns)
                row = conn.execute(sa.select(tables_table).where(key)).first()
                if row is None:
                    conn.execute(tables_table.insert().values(namespace=ns, name=name, registered_at=_now(), **values))
                elif row.base_uri != uri and not replace:
                    raise TableAlreadyExistsError(f"table {identifier} is already registered at {row.base_uri}")
                else:
                    if row.base_uri == uri and row.warehouse and warehouse is None:
                        values["warehouse"] = row.warehouse
                    conn.execute(tables_table.update().where(key).values(**values))
        except IntegrityError as err:  # lost a race with a concurrent register
            raise TableAlreadyExistsError(f"table {identifier} was registered concurrently") from err
        return self.load_table(identifier)

    def unregister_table(self, identifier: str) -> None:
        """Raises: UnknownTableError when ``identifier`` is not registered."""
        ns, name = parse_identifier(identifier)
        with self.engine.begin() as conn:
            deleted = conn.execute(
                tables_table.delete().where((tables_table.c.namespace == ns) & (tables_table.c.name == name))
            ).rowcount
        if not deleted:
            raise UnknownTableError(f"table {identifier} is not registered")

    def load_table(self, identifier: str) -> TableEntry:
        """Raises: UnknownTableError when ``identifier`` is not registered."""
        ns, name = parse_identifier(identifier)
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.select(tables_table).where((tables_table.c.namespace == ns) & (tables_table.c.name == name))
            ).first()
        if row is None:
            raise UnknownTableError(f"table {identifier} is not registered")
        return _row_to_entry(row)

    def list_tables(self, namespace: str | None = None) -> list[TableEntry]:
        query = sa.select(tables_table).order_by(tables_table.c.namespace, tables_table.c.name)
        if namespace is not None:
            query = query.where(tables_table.c.namespace == namespace)
        with self.engine.connect() as conn:
            return [_row_to_entry(r) for r in conn.execute(query)]

    # -- warehouses ---------------------------------------------------------------------
    def discover(
        self,
        warehouse: str,
        storage_options: Mapping[str, Any] | None = None,
        max_depth: int = 6,
        store_options: bool = True,
    ) -> list[TableEntry]:
        """Register every Hudi table under ``warehouse``; drop those of it that vanished.

        With ``store_options=False`` the storage options are used for listing only and not
        written to the catalog (the server supplies them per root when it opens a table).

        Returns the tables registered from this warehouse. A name already taken by a table
        from elsewhere is left alone (logged), so discovery never steals a manual entry.
        """
        found = find_hudi_tables(warehouse, storage_options, max_depth)
        stored = storage_options if store_options else None
        found_uris = {uri for _, uri in found}
        registered = []
        for identifier, uri in found:
            try:
                check_new_identifier(identifier)
            except InvalidQueryError as err:  # e.g. a folder named "1.2.0": one bad name must not stop the scan
                log.warning("warehouse %s: skipping a table: %s", warehouse, err)
                continue
            try:
                registered.append(self.register_table(identifier, uri, stored, warehouse=warehouse))
            except TableAlreadyExistsError as err:
                current = self.load_table(identifier)
                if current.warehouse == warehouse and current.base_uri not in found_uris:  # it moved
                    registered.append(
                        self.register_table(identifier, uri, stored, replace=True, warehouse=warehouse)
                    )
                else:
                    log.warning("warehouse %s: skipping %s: %s", warehouse, uri, err)
        keep = {e.identifier for e in registered}
        with self.engine.begin() as conn:
            stale = [
                (r.namespace, r.name)
                for r in conn.execute(sa.select(tables_table).where(tables_table.c.warehouse == warehouse))
                if f"{r.namespace}.{r.name}" not in keep
            ]
            for ns, name in stale:
                conn.execute(
                    tables_table.delete().where((tables_table.c.namespace == ns) & (tables_table.c.name == name))
                )
        return registered


def find_hudi_tables(
    warehouse: str, storage_options: Mapping[str, Any] | None = None, max_depth: int = 6
) -> list[tuple[str, str]]:
    """``[(namespace.table, uri)]`` for each folder under ``warehouse`` holding a Hudi table.

    Breadth-first, one listing per folder; a table's own folder is not descended into, and
    hidden folders (``.hoodie``, ``.tmp``...) are skipped.
    """
    storage = Storage(warehouse, storage_options)
    base_uri = warehouse.rstrip("/")
    root_name = posixpath.basename(storage.root.rstrip("/")) or "default"
    out: list[tuple[str, str]] = []
    todo: deque[tuple[str, int]] = deque([("", 0)])
    while todo:
        rel, depth = todo.popleft()
        try:
            entries = storage.ls(rel)
        except FileNotFoundError:
            if rel == "":
                raise
            continue
        names = {e["name"] for e in entries if e["type"] == "directory"}
        if ".hoodie" in names and storage.exists(posixpath.join(rel, ".hoodie", "hoodie.properties")):
            if rel:
                parent = posixpath.dirname(rel)
                namespace = posixpath.basename(parent) if parent else root_name
                out.append((f"{namespace}.{posixpath.basename(rel)}", f"{base_uri}/{rel}"))
            else:  # the warehouse is itself a table: named by its own folder and the one above it
                root = storage.root.rstrip("/")
                namespace = posixpath.basename(posixpath.dirname(root)) or "default"
                out.append((f"{namespace}.{root_name}", base_uri))
                log.info("warehouse %s is itself a table: serving it as %s.%s", warehouse, namespace, root_name)
            continue
        if depth < max_depth:
            todo.extend(
                (posixpath.join(rel, n) if rel else n, depth + 1) for n in sorted(names) if not n.startswith(".")
            )
    return out


__all__ = [
    "MAX_NAME_CHARS", "NAME_CHARACTERS", "Registry", "TableEntry", "check_new_identifier", "find_hudi_tables",
    "parse_identifier",
]
