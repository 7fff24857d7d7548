"""PEP 249 (DB-API 2.0) driver for a hudi-flight server: read-only SELECT over Flight + DuckDB.

::

    from flight_server.client.sql import dbapi
    conn = dbapi.connect("grpc://127.0.0.1:8815")
    cur = conn.cursor()
    cur.execute("SELECT city, count(*) FROM trips.rides WHERE fare > %(f)s GROUP BY city", {"f": 10})
    cur.fetchall()

Each table a query names is fetched from the service with the columns the query mentions and
its simple filters pushed down (see :mod:`flight_server.client.sql.planner`); DuckDB then runs the
whole query over those Arrow tables. Anything but a query raises :class:`NotSupportedError`
("read-only"). Parameters use ``pyformat`` and are bound on the client as SQL literals.
"""

from __future__ import annotations

import datetime as _dt
import itertools
from typing import Any, Iterator, Mapping, Sequence

import duckdb
import pyarrow as pa

from flight_server.client.session import HudiFlightClient
from flight_server.client.sql.planner import ReadOnlyError, ScanSpec, bind_parameters, parse_query, plan_select

apilevel = "2.0"
threadsafety = 1  # threads may share the module, not connections
paramstyle = "pyformat"


# -- PEP 249 exceptions ------------------------------------------------------------------------


class Warning(Exception):  # noqa: A001 - the name is mandated by PEP 249
    pass


class Error(Exception):
    pass


class InterfaceError(Error):
    pass


class DatabaseError(Error):
    pass


class DataError(DatabaseError):
    pass


class OperationalError(DatabaseError):
    pass


class IntegrityError(DatabaseError):
    pass


class InternalError(DatabaseError):
    pass


class ProgrammingError(DatabaseError):
    pass


class NotSupportedError(DatabaseError):
    pass


# -- PEP 249 types -----------------------------------------------------------------------------


class _TypeObject:
    """Compares equal to the Arrow type names (``description`` type codes) of one family."""

    def __init__(self, *prefixes: str):
        self.prefixes = prefixes

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and other.startswith(self.prefixes)

    def __hash__(self) -> int:
        return hash(self.prefixes)


STRING = _TypeObject("string", "large_string")
BINARY = _TypeObject("binary", "large_binary", "fixed_size_binary")
NUMBER = _TypeObject("int", "uint", "float", "double", "decimal", "bool")
DATETIME = _TypeObject("timestamp", "date", "time")
ROWID = _TypeObject("__rowid__")

Date = _dt.date
Time = _dt.time
Timestamp = _dt.datetime
Binary = bytes


def DateFromTicks(ticks: float) -> _dt.date:  # noqa: N802 - PEP 249 name
    return _dt.date.fromtimestamp(ticks)


def TimeFromTicks(ticks: float) -> _dt.time:  # noqa: N802 - PEP 249 name
    return _dt.datetime.fromtimestamp(ticks).time()


def TimestampFromTicks(ticks: float) -> _dt.datetime:  # noqa: N802 - PEP 249 name
    return _dt.datetime.fromtimestamp(ticks)


def _driver_errors(err: Exception) -> Error:
    """The PEP 249 error for an exception raised by the Flight layer or the planner."""
    if isinstance(err, ReadOnlyError):
        return NotSupportedError(str(err))
    if isinstance(err, ConnectionError):
        return OperationalError(str(err))
    if isinstance(err, LookupError):
        return ProgrammingError(str(err))
    if isinstance(err, (ValueError, TypeError, duckdb.Error)):
        return ProgrammingError(str(err))
    if isinstance(err, PermissionError):
        return OperationalError(str(err))
    if isinstance(err, NotImplementedError):
        return NotSupportedError(str(err))
    return InternalError(f"{type(err).__name__}: {err}")


# -- connection --------------------------------------------------------------------------------


#: DuckDB settings of the engine that runs the SQL over the fetched Arrow tables: it reads
#: nothing but those tables (no files, URLs or databases of the client host) and never
#: downloads or loads extensions; ``lock_configuration`` keeps the SQL from undoing that.
DUCKDB_SANDBOX: dict[str, Any] = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "allow_unsigned_extensions": False,
}


def sandboxed_duckdb() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB that can only see the Arrow tables registered into it."""
    db = duckdb.connect(":memory:", config=dict(DUCKDB_SANDBOX))
    db.execute("SET lock_configuration = true")
    return db


def connect(
    uri: str | None = None,
    *,
    host: str | None = None,
    port: int | None = None,
    namespace: str | None = None,
    timeout: float | None = 60.0,
    token: str | None = None,
) -> "Connection":
    """Open a connection to ``uri`` (``grpc://host:port``) or ``host``/``port``.

    ``namespace`` is the default schema for unqualified table names; ``token`` is the bearer
    token (a static token of ``[server.tokens]`` or one from the handshake). Raises
    :class:`OperationalError` naming the URI when the server cannot be reached.
    """
    if uri is None:
        uri = f"{host or '127.0.0.1'}:{port or 8815}"
    return Connection(uri, namespace=namespace, timeout=timeout, token=token)


class Connection:
    """A DB-API connection: one Flight session; transactions are no-ops (nothing is written)."""

    def __init__(
        self, uri: str, namespace: str | None = None, timeout: float | None = 60.0, token: str | None = None
    ):
        self.namespace = namespace
        try:
            self.session = HudiFlightClient(uri, timeout=timeout, token=token)
            self.session.action("health")
        except Exception as err:
            raise _driver_errors(err) from err
        self.uri = self.session.uri
        self._closed = False

    # PEP 249
    def close(self) -> None:
        if not self._closed:
            self.session.close()
            self._closed = True

    def commit(self) -> None:
        """Nothing to commit: the driver is read-only."""

    def rollback(self) -> None:
        """Nothing to roll back: the driver is read-only."""

    def cursor(self) -> "Cursor":
        self._check_open()
        return Cursor(self)

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise InterfaceError("connection is closed")

    # catalog access (used by the SQLAlchemy dialect)
    def call(self, action: str, body: Mapping[str, Any] | None = None) -> Any:
        """Run a service action, errors mapped to PEP 249 exceptions."""
        self._check_open()
        try:
            return self.session.action(action, body)
        except Exception as err:
            raise _driver_errors(err) from err

    def list_namespaces(self) -> list[str]:
        return list(self.call("list-namespaces"))

    def list_tables(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return list(self.call("list-tables", {"namespace": namespace} if namespace else {}))

    def table_info(self, identifier: str) -> dict[str, Any]:
        return dict(self.call("table-info", {"table": identifier}))

    def table_schema(self, identifier: str) -> pa.Schema:
        """The Arrow schema of a served table (no planning)."""
        self._check_open()
        try:
            return self.session.schema(identifier)
        except Exception as err:
            raise _driver_errors(err) from err

    def resolve(self, namespace: str | None, name: str) -> tuple[str, pa.Schema]:
        """``(identifier, schema)`` of a table reference; unqualified names use the default
        namespace, else the one namespace that has a table of that name."""
        if namespace is None:
            if self.namespace:
                namespace = self.namespace
            else:
                owners = [t["namespace"] for t in self.list_tables() if t["name"].lower() == name.lower()]
                if len(owners) != 1:
                    where = "no namespace" if not owners else f"namespaces {', '.join(sorted(owners))}"
                    raise ProgrammingError(f"table {name!r} is in {where}; qualify it as namespace.table")
                namespace = owners[0]
        identifier = f"{namespace}.{name}"
        return identifier, self.table_schema(identifier)


# -- cursor ------------------------------------------------------------------------------------


class Cursor:
    """A DB-API cursor over an Arrow result (``fetch_arrow_table`` returns it as is)."""

    arraysize = 1000

    def __init__(self, connection: Connection):
        self.connection = connection
        self.description: list[tuple] | None = None
        self.rowcount = -1
        self._result: pa.Table | None = None
        self._rows: Iterator[tuple] = iter(())
        self._closed = False

    def close(self) -> None:
        self._closed = True
        self._result = None
        self._rows = iter(())

    def __enter__(self) -> "Cursor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[tuple]:
        return self._rows

    def setinputsizes(self, sizes: Any) -> None:
        pass

    def setoutputsize(self, size: Any, column: Any = None) -> None:
        pass

    def execute(self, operation: str, parameters: Mapping[str, Any] | Sequence[Any] | None = None) -> "Cursor":
        if self._closed:
            raise InterfaceError("cursor is closed")
        self.connection._check_open()
        try:
            result = self._run(bind_parameters(operation, parameters or None))
        except Error:
            raise
        except Exception as err:
            raise _driver_errors(err) from err
        self._result = result
        self.rowcount = result.num_rows
        self.description = [(f.name, str(f.type), None, None, None, None, f.nullable) for f in result.schema]
        self._rows = _rows(result)
        return self

    def executemany(self, operation: str, seq_of_parameters: Sequence[Any]) -> None:
        raise NotSupportedError("hudi-flight is read-only: executemany is not supported")

    def _run(self, sql: str) -> pa.Table:
        plan = plan_select(parse_query(sql), self.connection.resolve)
        db = sandboxed_duckdb()
        try:
            for scan in plan.scans:
                db.register(scan.view, self._fetch(scan))
            return db.sql(plan.sql).to_arrow_table()
        finally:
            db.close()

    def _fetch(self, scan: ScanSpec) -> pa.Table:
        return self.connection.session.read(scan.table, scan.options)

    def fetch_arrow_table(self) -> pa.Table:
        """The whole result as Arrow (rows already fetched through ``fetch*`` are not removed)."""
        if self._result is None:
            raise ProgrammingError("no query has been executed")
        return self._result

    def fetchone(self) -> tuple | None:
        self._need_result()
        return next(self._rows, None)

    def fetchmany(self, size: int | None = None) -> list[tuple]:
        self._need_result()
        return list(itertools.islice(self._rows, size or self.arraysize))

    def fetchall(self) -> list[tuple]:
        self._need_result()
        return list(self._rows)

    def _need_result(self) -> None:
        if self._result is None:
            raise ProgrammingError("no query has been executed")


def _rows(table: pa.Table) -> Iterator[tuple]:
    """Python rows batch by batch (DB-API hands out Python values; this is the one conversion)."""
    for batch in table.to_batches():
        yield from zip(*(column.to_pylist() for column in batch.columns))


__all__ = [
    "BINARY",
    "DATETIME",
    "NUMBER",
    "ROWID",
    "STRING",
    "Connection",
    "Cursor",
    "DataError",
    "DatabaseError",
    "Error",
    "IntegrityError",
    "InterfaceError",
    "InternalError",
    "NotSupportedError",
    "OperationalError",
    "ProgrammingError",
    "Warning",
    "apilevel",
    "connect",
    "paramstyle",
    "threadsafety",
]
