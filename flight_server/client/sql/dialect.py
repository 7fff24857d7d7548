"""SQLAlchemy dialect ``hudi+flight://[user[:password]@]host:port[/namespace][?options]``.

Options: ``token=...`` (bearer token), ``tls=true`` (``grpc+tls://``), ``tls_root_certs=PATH``,
``cert_chain=PATH`` and ``private_key=PATH`` (mutual TLS), ``timeout=SECONDS``. ``user:password``
log in with Flight's basic-auth handshake; a password without a user name is taken as the bearer
token (``hudi+flight://:TOKEN@host:port``). ``/namespace`` is the default schema of inspection.

Built on :mod:`flight_server.client.sql.dbapi`: statements run on the server over Arrow Flight SQL
(``qmark`` parameters sent as a prepared statement's parameter row). Inspection uses the Flight
SQL catalog commands: ``GetDbSchemas`` (schemas = namespaces), ``GetTables`` with
``include_schema`` (tables, including the ``<table>_ro`` read-optimized view of a merge-on-read
table, and their Arrow schemas, mapped to SQL types here), ``GetPrimaryKeys`` (the Hudi record
key); a table comment naming the table type and version comes from the ``table-info`` action.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from catalog.meta import META_TABLES, SEPARATOR
from catalog.optional import optional_dependency
from flight_server.client.sql import dbapi
from flight_server.protocol import wire

with optional_dependency("sql", "the SQLAlchemy dialect"):
    from sqlalchemy import types as sqltypes
    from sqlalchemy.engine import default, reflection
    from sqlalchemy.engine.url import URL
    from sqlalchemy.exc import NoSuchTableError
    from sqlalchemy.sql import compiler

if TYPE_CHECKING:
    from sqlalchemy.engine.interfaces import (
        IsolationLevel,
        ReflectedColumn,
        ReflectedPrimaryKeyConstraint,
        ReflectedTableComment,
    )

_SIMPLE_TYPES: list[tuple[Any, Any]] = [
    (pa.types.is_boolean, sqltypes.Boolean),
    (pa.types.is_int8, sqltypes.SmallInteger),
    (pa.types.is_int16, sqltypes.SmallInteger),
    (pa.types.is_uint8, sqltypes.SmallInteger),
    (pa.types.is_int32, sqltypes.Integer),
    (pa.types.is_uint16, sqltypes.Integer),
    (pa.types.is_int64, sqltypes.BigInteger),
    (pa.types.is_uint32, sqltypes.BigInteger),
    (pa.types.is_uint64, sqltypes.Numeric),
    (pa.types.is_float16, sqltypes.REAL),
    (pa.types.is_float32, sqltypes.REAL),
    (pa.types.is_float64, sqltypes.Double),
    (pa.types.is_string, sqltypes.String),
    (pa.types.is_large_string, sqltypes.Text),
    (pa.types.is_binary, sqltypes.LargeBinary),
    (pa.types.is_large_binary, sqltypes.LargeBinary),
    (pa.types.is_date, sqltypes.Date),
    (pa.types.is_time, sqltypes.Time),
    (pa.types.is_duration, sqltypes.Interval),
]


def sql_type(dtype: pa.DataType) -> sqltypes.TypeEngine:
    """The SQLAlchemy type of an Arrow type (nested structs and maps become JSON)."""
    if pa.types.is_decimal(dtype):
        return sqltypes.Numeric(precision=dtype.precision, scale=dtype.scale)
    if pa.types.is_timestamp(dtype):
        return sqltypes.DateTime(timezone=dtype.tz is not None)
    if pa.types.is_fixed_size_binary(dtype):
        return sqltypes.BINARY(dtype.byte_width)
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or pa.types.is_fixed_size_list(dtype):
        return sqltypes.ARRAY(sql_type(dtype.value_type))
    if pa.types.is_struct(dtype) or pa.types.is_map(dtype):
        return sqltypes.JSON()
    if pa.types.is_dictionary(dtype):
        return sql_type(dtype.value_type)
    for test, type_ in _SIMPLE_TYPES:
        if test(dtype):
            return type_()
    return sqltypes.NullType()


class HudiFlightCompiler(compiler.SQLCompiler):
    """Generic SQL, with ``LIMIT``/``OFFSET`` written as integers rather than parameters: the
    server pushes a literal limit into its plan, and the statement stays readable in logs."""

    def limit_clause(self, select: Any, **kw: Any) -> str:
        text = ""
        if select._limit_clause is not None:
            text += "\n LIMIT " + self.process(select._limit_clause, **{**kw, "literal_execute": True})
        if select._offset_clause is not None:
            text += "\n OFFSET " + self.process(select._offset_clause, **{**kw, "literal_execute": True})
        return text


#: URL query options handed to the client as they are
_CLIENT_OPTIONS = ("token", "tls_root_certs", "cert_chain", "private_key")


class HudiFlightDialect(default.DefaultDialect):
    """Read-only dialect compiling generic ANSI SQL, which the server runs (DuckDB's dialect)."""

    name = "hudi"
    driver = "flight"
    supports_statement_cache = True
    supports_alter = False
    supports_sequences = False
    supports_native_boolean = True
    supports_native_decimal = True
    supports_simple_order_by_label = True
    supports_schemas = True
    supports_views = False
    postfetch_lastrowid = False
    default_paramstyle = "qmark"
    statement_compiler = HudiFlightCompiler

    @classmethod
    def import_dbapi(cls) -> ModuleType:
        return dbapi

    def create_connect_args(self, url: URL) -> tuple[list[Any], dict[str, Any]]:
        query: dict[str, Any] = dict(url.query)
        tls = str(query.pop("tls", "false")).lower() in ("1", "true", "yes")
        timeout = float(query.pop("timeout")) if "timeout" in query else 60.0
        kwargs: dict[str, Any] = {key: query.pop(key) for key in _CLIENT_OPTIONS if key in query}
        if query:
            raise ValueError(f"unknown hudi+flight URL options: {', '.join(sorted(query))}")
        if url.username:
            kwargs["user"] = url.username
            if url.password is not None:
                kwargs["password"] = url.password
        elif url.password:
            kwargs.setdefault("token", url.password)
        uri = wire.uri(url.host or wire.DEFAULT_HOST, url.port or wire.DEFAULT_PORT, tls or "tls_root_certs" in kwargs)
        return [], {"uri": uri, "namespace": url.database or None, "timeout": timeout, **kwargs}

    # -- no transactions ---------------------------------------------------------------------
    def do_begin(self, dbapi_connection: Any) -> None:
        pass

    def do_rollback(self, dbapi_connection: Any) -> None:
        pass

    def do_commit(self, dbapi_connection: Any) -> None:
        pass

    def get_isolation_level(self, dbapi_connection: Any) -> IsolationLevel:
        return "AUTOCOMMIT"

    def get_default_isolation_level(self, dbapi_conn: Any) -> IsolationLevel:
        return "AUTOCOMMIT"

    def _get_server_version_info(self, connection: Any) -> tuple[int, ...]:
        return ()

    # None when the URL names no namespace (SQLAlchemy's default_schema_name is optional).
    def _get_default_schema_name(self, connection: Any) -> str | None:  # type: ignore[override]
        return _driver(connection).namespace

    def do_ping(self, dbapi_connection: Any) -> bool:
        dbapi_connection.call(wire.HEALTH)
        return True

    # -- inspection --------------------------------------------------------------------------
    def _namespace(self, connection: Any, schema: str | None) -> str | None:
        return schema or _driver(connection).namespace

    @reflection.cache
    def _schema(self, connection: Any, table_name: str, schema: str | None, **kw: Any) -> pa.Schema:
        namespace = self._namespace(connection, schema)
        found = _driver(connection).table_schema(namespace, table_name) if namespace else None
        if found is None:
            raise NoSuchTableError(f"{namespace}.{table_name}" if namespace else table_name)
        return found

    def get_schema_names(self, connection: Any, **kw: Any) -> list[str]:
        return _driver(connection).list_namespaces()

    def has_schema(self, connection: Any, schema_name: str, **kw: Any) -> bool:
        return schema_name in self.get_schema_names(connection, **kw)

    @reflection.cache
    def get_table_names(self, connection: Any, schema: str | None = None, **kw: Any) -> list[str]:
        namespace = self._namespace(connection, schema)
        return _driver(connection).list_tables(namespace) if namespace else []

    def has_table(self, connection: Any, table_name: str, schema: str | None = None, **kw: Any) -> bool:
        if table_name in self.get_table_names(connection, schema, **kw):
            return True
        # metadata tables (``t$timeline``) are not listed, but described when named
        namespace = self._namespace(connection, schema)
        return SEPARATOR in table_name and namespace is not None and (
            _driver(connection).table_schema(namespace, table_name) is not None
        )

    def get_view_names(self, connection: Any, schema: str | None = None, **kw: Any) -> list[str]:
        """The metadata tables (``t$timeline``, ...) of the namespace's tables: read-only tables
        derived from each table, not listed as tables (as in Trino), told as views so that
        ``MetaData.reflect(only=..., views=True)`` and ``pandas.read_sql_table`` find them."""
        tables = self.get_table_names(connection, schema, **kw)
        ro_views = {t + wire.RO_SUFFIX for t in tables}  # a merge-on-read table's `t_ro` has none of its own
        bases = [t for t in tables if t not in ro_views]
        return [f"{table}{SEPARATOR}{kind}" for table in bases for kind in META_TABLES]

    def get_materialized_view_names(self, connection: Any, schema: str | None = None, **kw: Any) -> list[str]:
        return []

    def get_columns(
        self, connection: Any, table_name: str, schema: str | None = None, **kw: Any
    ) -> list[ReflectedColumn]:
        return [
            {"name": f.name, "type": sql_type(f.type), "nullable": f.nullable, "default": None, "autoincrement": False}
            for f in self._schema(connection, table_name, schema, **kw)
        ]

    def get_pk_constraint(
        self, connection: Any, table_name: str, schema: str | None = None, **kw: Any
    ) -> ReflectedPrimaryKeyConstraint:
        self._schema(connection, table_name, schema, **kw)  # NoSuchTableError for an unknown table
        namespace = self._namespace(connection, schema)
        return {"constrained_columns": _driver(connection).primary_key(namespace, table_name), "name": None}

    def get_foreign_keys(self, connection: Any, table_name: str, schema: str | None = None, **kw: Any) -> list:
        return []

    def get_indexes(self, connection: Any, table_name: str, schema: str | None = None, **kw: Any) -> list:
        return []

    def get_unique_constraints(self, connection: Any, table_name: str, schema: str | None = None, **kw: Any) -> list:
        return []

    def get_check_constraints(self, connection: Any, table_name: str, schema: str | None = None, **kw: Any) -> list:
        return []

    def get_table_comment(
        self, connection: Any, table_name: str, schema: str | None = None, **kw: Any
    ) -> ReflectedTableComment:
        self._schema(connection, table_name, schema, **kw)  # NoSuchTableError for an unknown table
        namespace = self._namespace(connection, schema)
        try:
            info = _driver(connection).call(wire.TABLE_INFO, {"table": f"{namespace}.{table_name}"})
        except dbapi.ProgrammingError:  # a ``<table>_ro`` view is listed, not registered itself
            return {"text": None}
        text = f"Hudi {info['table_type']} table, table version {info['table_version']}"
        if info.get("partition_fields"):
            text += f", partitioned by {', '.join(info['partition_fields'])}"
        return {"text": text}


def _driver(connection: Any) -> Any:
    """The :class:`flight_server.dbapi.Connection` behind a SQLAlchemy connection."""
    return connection.connection.dbapi_connection


__all__ = ["HudiFlightDialect", "sql_type"]
