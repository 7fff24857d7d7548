"""Results of the Flight SQL catalog commands: GetCatalogs, GetDbSchemas, GetTables,
GetTableTypes, GetPrimaryKeys, GetXdbcTypeInfo, and the foreign-key commands (GetImportedKeys,
GetExportedKeys, GetCrossReference: always empty, Hudi tables have no foreign keys; schemas in
:mod:`.schemas`).

Listings show only what the caller may read (``Call.readable``); a table that cannot
be opened is left out of a listing (and logged) instead of failing it. Metadata tables
(``t$timeline``, ``catalog.meta``) are not listed (as in Trino), but GetTables with a table name
pattern without ``%`` that matches one answers it (LIKE's ``_`` matches itself, so a name with
``_`` passed as a pattern, as JDBC's ``getColumns`` and ADBC's ``adbc_get_table_schema`` pass
it, finds its table), so that clients can describe it (SQLAlchemy's
``inspect(engine).get_columns("t$timeline", schema="ns")``).
"""

from __future__ import annotations

import logging
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight
from google.protobuf.message import Message

from catalog.errors import UnknownTableError
from catalog.meta import META_TABLES, SEPARATOR
from catalog.plan.options import ReadOptions
from flight_server.protocol import sql
from flight_server.server.flightsql import schemas
from flight_server.server.flightsql.column_metadata import Origin, describe
from flight_server.server.flightsql.like import LikePattern, like, matches
from flight_server.server.flightsql.names import CATALOG, RO_SUFFIX, resolve_name
from flight_server.server.flightsql.sql_info import sql_info
from flight_server.server.query.queries import Call

log = logging.getLogger(__name__)
#: lower case as ADBC drivers report it (sqlalchemy-adbc matches ``"table"`` exactly); JDBC tools
#: (DBeaver: only a type containing VIEW is a view) compare it ignoring case
TABLE_TYPE = "table"


def _catalog_ok(catalog: str | None) -> bool:
    return catalog is None or catalog == CATALOG


def catalogs() -> pa.Table:
    return pa.Table.from_pylist([{"catalog_name": CATALOG}], schema=schemas.CATALOGS)


def db_schemas(call: Call, cmd: sql.CommandGetDbSchemas) -> pa.Table:
    catalog = cmd.catalog if cmd.HasField("catalog") else None
    pattern = like(cmd.db_schema_filter_pattern if cmd.HasField("db_schema_filter_pattern") else None)
    rows = []
    if _catalog_ok(catalog):
        readable = call.readable([e.identifier for e in call.entries()])
        namespaces = sorted({i.partition(".")[0] for i in readable} | _empty_namespaces(call))
        rows = [{"catalog_name": CATALOG, "db_schema_name": ns} for ns in namespaces if matches(pattern, ns)]
    return pa.Table.from_pylist(rows, schema=schemas.DB_SCHEMAS)


def _empty_namespaces(call: Call) -> set[str]:
    """Namespaces without tables are shown to callers who may administer the catalog only."""
    used = {e.namespace for e in call.entries()}
    empty = set(call.namespaces()) - used
    if not empty:
        return set()
    try:
        call.authorize("admin")
    except flight.FlightError:
        return set()
    return empty


def tables(call: Call, cmd: sql.CommandGetTables) -> pa.Table:
    catalog = cmd.catalog if cmd.HasField("catalog") else None
    ns_pattern = like(cmd.db_schema_filter_pattern if cmd.HasField("db_schema_filter_pattern") else None)
    name_pattern = like(cmd.table_name_filter_pattern if cmd.HasField("table_name_filter_pattern") else None)
    types = {t.lower() for t in cmd.table_types}  # JDBC tools ask for "TABLE"
    schema = schemas.TABLES_WITH_SCHEMA if cmd.include_schema else schemas.TABLES
    rows: list[dict[str, Any]] = []
    if not _catalog_ok(catalog) or (types and TABLE_TYPE not in types):
        return pa.Table.from_pylist(rows, schema=schema)
    entries = {e.identifier: e for e in call.entries() if matches(ns_pattern, e.namespace)}
    for identifier in call.readable(list(entries)):
        entry = entries[identifier]
        try:
            state = call.open_entry(entry).state
            views = [(entry.name, ReadOptions())]
            if state.config.is_mor:
                views.append((entry.name + RO_SUFFIX, ReadOptions(query_type="read_optimized")))
            for name, options in views:
                if not matches(name_pattern, name):
                    continue
                row: dict[str, Any] = {
                    "catalog_name": CATALOG, "db_schema_name": entry.namespace, "table_name": name,
                    "table_type": TABLE_TYPE,
                }
                if cmd.include_schema:
                    described = describe(call.plan(identifier, options).schema, Origin(CATALOG, entry.namespace, name))
                    row["table_schema"] = described.serialize().to_pybytes()
                rows.append(row)
            for name, kind in _named_meta_tables(name_pattern, entry.name):
                if f"{entry.namespace}.{name}" not in entries:  # a registered table of that name wins
                    rows.append(_meta_row(entry.namespace, name, META_TABLES[kind].schema, cmd.include_schema))
        except Exception as err:  # one unreadable table must not hide the others
            log.warning("GetTables: skipping %s: %s", identifier, err)
    return pa.Table.from_pylist(rows, schema=schema)


def _named_meta_tables(pattern: LikePattern | None, table: str) -> list[tuple[str, str]]:
    """``(name, kind)`` of the metadata tables of ``table`` that a name pattern without ``%``
    matches, as LIKE matches: ``_`` is any one character, so ``v9_t$timeline`` (as a JDBC tool
    sends a name it was given) finds ``v9_t$timeline``. A pattern with ``%`` lists none: metadata
    tables are named, not listed (as in Trino)."""
    if pattern is None or not pattern.anchored:
        return []
    names = [(f"{table}{SEPARATOR}{kind}", kind) for kind in META_TABLES]
    return [(name, kind) for name, kind in names if pattern.matches(name)]


def _meta_row(namespace: str, name: str, schema: pa.Schema, include_schema: bool) -> dict[str, Any]:
    """The GetTables row of the metadata table ``namespace.name`` (``t$timeline``)."""
    row: dict[str, Any] = {
        "catalog_name": CATALOG, "db_schema_name": namespace, "table_name": name, "table_type": TABLE_TYPE
    }
    if include_schema:
        row["table_schema"] = describe(schema, Origin(CATALOG, namespace, name)).serialize().to_pybytes()
    return row


def table_types() -> pa.Table:
    return pa.Table.from_pylist([{"table_type": TABLE_TYPE}], schema=schemas.TABLE_TYPES)


def primary_keys(call: Call, cmd: sql.CommandGetPrimaryKeys) -> pa.Table:
    """The record key fields of a table the caller may read; no rows for a missing table and for
    one the caller may not read alike (existence is not revealed)."""
    try:
        ref = resolve_name(
            call,
            cmd.catalog if cmd.HasField("catalog") else None,
            cmd.db_schema if cmd.HasField("db_schema") else None,
            cmd.table,
            only_readable=True,
        )
    except UnknownTableError:
        return pa.Table.from_pylist([], schema=schemas.PRIMARY_KEYS)
    rows = []
    if call.readable([ref.identifier]) and ref.meta is None:  # a metadata table has no key
        keys = call.open_entry(ref.entry).state.config.record_key_fields
        rows = [
            {"catalog_name": CATALOG, "db_schema_name": ref.entry.namespace, "table_name": cmd.table,
             "column_name": key, "key_sequence": i, "key_name": None}
            for i, key in enumerate(keys, start=1)
        ]
    return pa.Table.from_pylist(rows, schema=schemas.PRIMARY_KEYS)


# XdbcDataType codes and the SQL types Hudi tables map to in Arrow (and so in the engine)
_DATETIME = 9
_XDBC_TYPES: list[tuple[str, int, int | None, str | None, bool, int | None]] = [
    # type name, data type, column size, literal prefix, case sensitive, datetime subcode
    ("BOOLEAN", -7, 1, None, False, None),
    ("TINYINT", -6, 3, None, False, None),
    ("SMALLINT", 5, 5, None, False, None),
    ("INTEGER", 4, 10, None, False, None),
    ("BIGINT", -5, 19, None, False, None),
    ("FLOAT", 6, 7, None, False, None),
    ("DOUBLE", 8, 15, None, False, None),
    ("DECIMAL", 3, 38, None, False, None),
    ("VARCHAR", 12, None, "'", True, None),
    ("VARBINARY", -3, None, None, False, None),
    ("DATE", 91, 10, "DATE '", False, 1),
    ("TIME", 92, 15, "TIME '", False, 2),
    ("TIMESTAMP", 93, 26, "TIMESTAMP '", False, 3),
]


def xdbc_type_info(cmd: sql.CommandGetXdbcTypeInfo) -> pa.Table:
    wanted = cmd.data_type if cmd.HasField("data_type") else None
    rows = []
    for name, code, size, prefix, case_sensitive, subcode in _XDBC_TYPES:
        if wanted is not None and wanted != code:
            continue
        numeric = prefix is None and name not in ("BOOLEAN", "VARBINARY")
        rows.append({
            "type_name": name, "data_type": code, "column_size": size, "literal_prefix": prefix,
            "literal_suffix": "'" if prefix else None,
            "create_params": ["precision", "scale"] if name == "DECIMAL" else None,
            "nullable": 1, "case_sensitive": case_sensitive, "searchable": 3,
            "unsigned_attribute": False if numeric else None, "fixed_prec_scale": name == "DECIMAL",
            "auto_increment": False if numeric else None, "local_type_name": name,
            "minimum_scale": 0 if name == "DECIMAL" else None, "maximum_scale": 38 if name == "DECIMAL" else None,
            "sql_data_type": _DATETIME if subcode else code, "datetime_subcode": subcode,
            "num_prec_radix": 10 if numeric else None, "interval_precision": None,
        })
    return pa.Table.from_pylist(rows, schema=schemas.XDBC_TYPE_INFO)


def result_schema(cmd: Message) -> pa.Schema:
    if isinstance(cmd, sql.CommandGetTables):
        return schemas.TABLES_WITH_SCHEMA if cmd.include_schema else schemas.TABLES
    return _FIXED[type(cmd)]


_FIXED: dict[type, pa.Schema] = {
    sql.CommandGetCatalogs: schemas.CATALOGS,
    sql.CommandGetDbSchemas: schemas.DB_SCHEMAS,
    sql.CommandGetTableTypes: schemas.TABLE_TYPES,
    sql.CommandGetPrimaryKeys: schemas.PRIMARY_KEYS,
    sql.CommandGetXdbcTypeInfo: schemas.XDBC_TYPE_INFO,
    sql.CommandGetSqlInfo: schemas.SQL_INFO,
    sql.CommandGetImportedKeys: schemas.FOREIGN_KEYS,
    sql.CommandGetExportedKeys: schemas.FOREIGN_KEYS,
    sql.CommandGetCrossReference: schemas.FOREIGN_KEYS,
}

METADATA_COMMANDS = tuple(_FIXED) + (sql.CommandGetTables,)


def result(call: Call, cmd: Message) -> pa.Table:
    """The rows of a catalog command."""
    if isinstance(cmd, sql.CommandGetCatalogs):
        return catalogs()
    if isinstance(cmd, sql.CommandGetDbSchemas):
        return db_schemas(call, cmd)
    if isinstance(cmd, sql.CommandGetTables):
        return tables(call, cmd)
    if isinstance(cmd, sql.CommandGetTableTypes):
        return table_types()
    if isinstance(cmd, sql.CommandGetPrimaryKeys):
        return primary_keys(call, cmd)
    if isinstance(cmd, sql.CommandGetXdbcTypeInfo):
        return xdbc_type_info(cmd)
    if isinstance(cmd, sql.CommandGetSqlInfo):
        return sql_info(cmd.info)
    return schemas.FOREIGN_KEYS.empty_table()


__all__ = ["METADATA_COMMANDS", "result", "result_schema"]
