"""Answers of the catalog statements (:mod:`flight_server.server.sql.show`) from the catalog:
the same tables GetTables lists and the columns of a table as Flight SQL types."""

from __future__ import annotations

import pyarrow as pa

from catalog.meta import META_TABLES
from flight_server.protocol import sql
from flight_server.server.flightsql import catalog
from flight_server.server.flightsql.column_metadata import describe, sql_type
from flight_server.server.flightsql.names import readable_name
from flight_server.server.query.queries import Call
from flight_server.server.sql.show import CatalogStatement, ShowTables

TABLES = pa.schema([
    pa.field("namespace", pa.utf8(), nullable=False),
    pa.field("table_name", pa.utf8(), nullable=False),
    pa.field("table_type", pa.utf8(), nullable=False),
])
COLUMNS = pa.schema([
    pa.field("column_name", pa.utf8(), nullable=False),
    pa.field("column_type", pa.utf8(), nullable=False),
    pa.field("null", pa.utf8(), nullable=False),
    pa.field("key", pa.utf8()),
])


def result_schema(statement: CatalogStatement) -> pa.Schema:
    return describe(TABLES if isinstance(statement, ShowTables) else COLUMNS)


def result(call: Call, statement: CatalogStatement) -> pa.Table:
    """The rows of ``statement``, as the caller may see them.

    Raises:
        flight.FlightUnauthorizedError: DESCRIBE of a table the caller may not read, whether it
            exists or not (as a SELECT of it: ``names.readable_name``).
        UnknownTableError: DESCRIBE of a missing table the caller could read.
    """
    if isinstance(statement, ShowTables):
        command = sql.CommandGetTables()
        if statement.namespace is not None:
            command.db_schema_filter_pattern = _escaped(statement.namespace)
        listed = catalog.tables(call, command)
        rows = [{"namespace": r["db_schema_name"], "table_name": r["table_name"], "table_type": r["table_type"]}
                for r in listed.to_pylist()]
        return pa.Table.from_pylist(rows, schema=result_schema(statement))
    ref = readable_name(call, statement.catalog, statement.namespace, statement.table)
    if ref.meta is not None:  # a metadata table: its own columns, no key
        keys: set[str] = set()
        schema = META_TABLES[ref.meta].schema
    else:
        keys = set(call.open(ref.identifier).state.config.record_key_fields)
        schema = call.plan(ref.identifier, ref.options).schema
    rows = [
        {"column_name": f.name, "column_type": _type_text(f.type), "null": "YES" if f.nullable else "NO",
         "key": "PRI" if f.name in keys else None}
        for f in schema
    ]
    return pa.Table.from_pylist(rows, schema=result_schema(statement))


def _type_text(dtype: pa.DataType) -> str:
    name, precision, scale = sql_type(dtype)
    return f"{name}({precision},{scale})" if name == "DECIMAL" else name


def _escaped(text: str) -> str:
    """``text`` as a LIKE pattern matching exactly itself."""
    return "".join("\\" + ch if ch in "%_\\" else ch for ch in text)


__all__ = ["result", "result_schema"]
