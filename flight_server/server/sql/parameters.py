"""The types of a query's ``?`` parameters, for the parameter schema of a prepared statement.

Clients such as the Arrow Flight SQL JDBC driver bind a value only into a parameter whose Arrow
type the prepare answer declares (an empty parameter schema: "parameter ordinal out of range").
A parameter takes the type its place in the query implies:

- compared with a column (``=``, ``<>``, ``<``, ``<=``, ``>``, ``>=``, ``[NOT] IN``, ``BETWEEN``,
  ``+``/``-``/``*``/``/``): that column's Arrow type (nested columns excepted);
- ``CAST(? AS type)``: that type, for the common SQL types;
- ``LIMIT ?`` / ``OFFSET ?``: ``int64``; ``LIKE ?``: ``utf8``;
- anywhere else: ``utf8`` (DuckDB casts the bound text where the query needs another type).

Timestamps are declared in milliseconds (zone kept): the JDBC driver writes a
``java.sql.Timestamp``'s epoch milliseconds whatever unit the parameter declares.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pyarrow as pa
from sqlglot import exp

from flight_server.server.sql.planner import parse_query, table_references
from flight_server.server.sql.query import bind, placeholder_count

#: a table reference -> its Arrow schema (``None``: not a served table)
SchemaOf = Callable[[exp.Table], pa.Schema | None]

_MARK = "__hudi_flight_parameter_{}__"
_COMPARED = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.NullSafeEQ)
#: SQL type (sqlglot's ``DataType.Type`` name) -> Arrow type
_CAST_TYPES: dict[str, pa.DataType] = {
    "BOOLEAN": pa.bool_(),
    "TINYINT": pa.int8(),
    "SMALLINT": pa.int16(),
    "INT": pa.int32(),
    "BIGINT": pa.int64(),
    "FLOAT": pa.float32(),
    "DOUBLE": pa.float64(),
    "DATE": pa.date32(),
    "TIMESTAMP": pa.timestamp("ms"),
    "TIMESTAMPTZ": pa.timestamp("ms", tz="UTC"),
    "VARCHAR": pa.utf8(),
    "TEXT": pa.utf8(),
    "VARBINARY": pa.binary(),
    "BLOB": pa.binary(),
}


@dataclass(frozen=True)
class Places:
    """Where each ``?`` of a statement stands (parsed once per text): the type its place says
    (a cast, ``LIMIT``, ``LIKE``, anywhere else ``utf8``) or the column it is compared with,
    typed by the table's schema when asked (:func:`parameter_types`).

    Attributes:
        tables: the statement's table references.
        places: one per ``?``, in the order they are written.
    """

    tables: tuple[exp.Table, ...]
    places: tuple[pa.DataType | exp.Column, ...]


def parameter_places(sql: str) -> Places:
    """The places of the ``?`` parameters of ``sql``."""
    count = placeholder_count(sql)
    if not count:
        return Places((), ())
    query = parse_query(bind(sql, [_MARK.format(i) for i in range(count)]))
    marks = {node.this: node for node in query.find_all(exp.Literal) if node.is_string}
    return Places(tuple(table_references(query)), tuple(_place(marks.get(_MARK.format(i))) for i in range(count)))


def parameter_types(places: Places, schema_of: SchemaOf) -> pa.Schema:
    """One nullable field per ``?`` (``parameter_1``, ...), a compared column's type read from
    ``schema_of`` its table."""
    if not places.places:
        return pa.schema([])
    columns = _ColumnTypes(places.tables, schema_of)
    types = [place if isinstance(place, pa.DataType) else _column_type(place, columns) for place in places.places]
    return pa.schema([pa.field(f"parameter_{i + 1}", t) for i, t in enumerate(types)])


def parameter_schema(sql: str, schema_of: SchemaOf) -> pa.Schema:
    """One nullable field per ``?`` of ``sql``, in the order they are written (``parameter_1``, ...)."""
    return parameter_types(parameter_places(sql), schema_of)


class _ColumnTypes:
    """Arrow types of the query's column references (by alias or table name; unqualified when unique)."""

    def __init__(self, tables: tuple[exp.Table, ...], schema_of: SchemaOf):
        self.by_alias: dict[str, pa.Schema] = {}
        for table in tables:
            schema = schema_of(table)
            if schema is not None:
                self.by_alias[table.alias_or_name.lower()] = schema

    def type_of(self, column: exp.Column) -> pa.DataType | None:
        schemas = [self.by_alias.get(column.table.lower())] if column.table else list(self.by_alias.values())
        found = [f.type for s in schemas if s is not None for f in s if f.name.lower() == column.name.lower()]
        if len(found) != 1 or pa.types.is_nested(found[0]):
            return None
        return found[0]


def _place(mark: exp.Literal | None) -> pa.DataType | exp.Column:
    if mark is None:
        return pa.utf8()
    node: exp.Expression = mark
    while isinstance(node.parent, exp.Paren):
        node = node.parent
    parent = node.parent
    if isinstance(parent, (exp.Cast, exp.TryCast)):
        return _CAST_TYPES.get(parent.to.this.name, pa.utf8())
    if isinstance(parent, (exp.Limit, exp.Offset)):
        return pa.int64()
    if isinstance(parent, (exp.Like, exp.ILike)):
        return pa.utf8()
    column = None
    if isinstance(parent, _COMPARED):
        other = parent.expression if parent.this is node else parent.this
        column = other if isinstance(other, exp.Column) else None
    elif isinstance(parent, (exp.In, exp.Between)) and parent.this is not node:
        column = parent.this if isinstance(parent.this, exp.Column) else None
    return column if column is not None else pa.utf8()


def _column_type(column: exp.Column, columns: _ColumnTypes) -> pa.DataType:
    found = columns.type_of(column)
    if found is not None and pa.types.is_timestamp(found):
        return pa.timestamp("ms", tz=found.tz)
    return found if found is not None else pa.utf8()


__all__ = ["Places", "SchemaOf", "parameter_places", "parameter_schema", "parameter_types"]
