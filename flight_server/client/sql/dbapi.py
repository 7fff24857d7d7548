"""PEP 249 (DB-API 2.0) driver for a hudi-flight server, over Arrow Flight SQL.

::

    from flight_server.client.sql import dbapi
    conn = dbapi.connect("grpc://127.0.0.1:8815")
    cur = conn.cursor()
    cur.execute("SELECT city, count(*) FROM trips.rides WHERE fare > ? GROUP BY city", (10,))
    cur.fetchall()

The SQL runs on the server (Flight SQL ``CommandStatementQuery``; with parameters, a prepared
statement whose parameter row is sent with ``DoPut``): nothing is evaluated on the client. The
result's endpoints are fetched in parallel and streamed (see :mod:`.flightsql`). Parameters use
``qmark`` (``?``, positional) and never become SQL text on the client. The server accepts only
reads; its refusal arrives as :class:`ProgrammingError` (or :class:`NotSupportedError` for what
it does not implement) carrying its message.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, Iterator, Mapping, Sequence

import pyarrow as pa

from flight_server.client.session import HudiFlightClient, QueryPlan
from flight_server.client.sql import flightsql
from flight_server.protocol import wire

apilevel = "2.0"
threadsafety = 1  # threads may share the module, not connections
paramstyle = "qmark"


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
    """The PEP 249 error for an exception raised by the Flight layer (messages kept)."""
    if isinstance(err, (ConnectionError, PermissionError, TimeoutError)):
        return OperationalError(str(err))
    if isinstance(err, NotImplementedError):
        return NotSupportedError(str(err))
    if isinstance(err, (LookupError, ValueError, TypeError)):
        return ProgrammingError(str(err))
    return InternalError(f"{type(err).__name__}: {err}")


# -- connection --------------------------------------------------------------------------------


def connect(
    uri: str | None = None,
    *,
    host: str | None = None,
    port: int | None = None,
    namespace: str | None = None,
    timeout: float | None = 60.0,
    **client_kwargs: Any,
) -> "Connection":
    """Open a connection to ``uri`` (``grpc://host:port``, ``grpc+tls://...``) or ``host``/``port``.

    ``namespace`` is the default schema of inspection (SQLAlchemy's default schema);
    ``client_kwargs`` are those of :class:`HudiFlightClient` (``token``, ``user``, ``password``,
    ``tls_root_certs``, ``cert_chain``, ``private_key``, ``max_workers``). Raises
    :class:`OperationalError` naming the URI when the server cannot be reached or refuses the
    credentials.
    """
    if uri is None:
        uri = f"{host or wire.DEFAULT_HOST}:{port or wire.DEFAULT_PORT}"
    return Connection(uri, namespace=namespace, timeout=timeout, **client_kwargs)


class Connection:
    """A DB-API connection: one Flight session; transactions are no-ops (nothing is written)."""

    def __init__(self, uri: str, namespace: str | None = None, timeout: float | None = 60.0, **client_kwargs: Any):
        self.namespace = namespace
        try:
            self.session = HudiFlightClient(uri, timeout=timeout, **client_kwargs)
            self.session.action(wire.HEALTH)
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

    def _call(self, function: Any, *args: Any) -> Any:
        """``function(self.session, *args)`` with errors mapped to PEP 249 exceptions."""
        self._check_open()
        try:
            return function(self.session, *args)
        except Error:
            raise
        except Exception as err:
            raise _driver_errors(err) from err

    # catalog access (used by the SQLAlchemy dialect): Flight SQL catalog commands
    def list_namespaces(self) -> list[str]:
        return self._call(flightsql.db_schemas)

    def list_tables(self, namespace: str) -> list[str]:
        return self._call(flightsql.tables, namespace)

    def table_schema(self, namespace: str, table: str) -> pa.Schema | None:
        """The Arrow schema of a table (``None``: no such table)."""
        return self._call(flightsql.table_schema, namespace, table)

    def primary_key(self, namespace: str, table: str) -> list[str]:
        return self._call(flightsql.primary_key, namespace, table)

    def call(self, action: str, body: Mapping[str, Any] | None = None) -> Any:
        """Run one of the service's own actions (``health``, ``table-info``, ...)."""
        return self._call(lambda session: session.action(action, body))


# -- cursor ------------------------------------------------------------------------------------


class Cursor:
    """A DB-API cursor over a streamed Arrow result.

    ``description`` is known as soon as the query is planned; rows are fetched from the
    endpoints (in parallel) as ``fetch*`` asks for them. ``rowcount`` is -1 (unknown).
    """

    arraysize = 1000

    def __init__(self, connection: Connection):
        self.connection = connection
        self.description: list[tuple] | None = None
        self.rowcount = -1
        self._plan: QueryPlan | None = None
        self._reader: pa.RecordBatchReader | None = None
        self._batch: pa.RecordBatch | None = None
        self._offset = 0
        self._closed = False

    def close(self) -> None:
        self._release()
        self._closed = True

    def _release(self) -> None:
        if self._reader is not None:
            self._reader.close()
        self._reader, self._batch, self._offset = None, None, 0

    def __enter__(self) -> "Cursor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[tuple]:
        while (row := self.fetchone()) is not None:
            yield row

    def setinputsizes(self, sizes: Any) -> None:
        pass

    def setoutputsize(self, size: Any, column: Any = None) -> None:
        pass

    def execute(self, operation: str, parameters: Sequence[Any] | None = None) -> "Cursor":
        """Run ``operation`` on the server; ``parameters`` bind its ``?`` placeholders in order."""
        if self._closed:
            raise InterfaceError("cursor is closed")
        if parameters is not None and (isinstance(parameters, (Mapping, str, bytes))):
            raise ProgrammingError("parameters are positional (paramstyle 'qmark'): pass a sequence")
        self._release()
        self.description = None
        values = list(parameters) if parameters is not None and len(parameters) else None
        plan = self.connection._call(flightsql.statement_plan, operation, values)
        self._plan = plan
        self._reader = self.connection._call(lambda session: session.stream(plan))
        self.description = [_describe(f) for f in plan.schema]
        return self

    def executemany(self, operation: str, seq_of_parameters: Sequence[Any]) -> None:
        raise NotSupportedError("hudi-flight is read-only: executemany is not supported")

    def _next_batch(self) -> pa.RecordBatch | None:
        """The batch holding the next unread row (``None``: the result is exhausted)."""
        if self._closed:
            raise InterfaceError("cursor is closed")
        if self._reader is None:
            raise ProgrammingError("no query has been executed")
        reader = self._reader
        while self._batch is None or self._offset >= self._batch.num_rows:
            self._batch = self.connection._call(lambda _: next(iter(reader), None))
            self._offset = 0
            if self._batch is None:
                return None
        return self._batch

    def _take(self, size: int | None) -> list[pa.RecordBatch]:
        """Up to ``size`` unread rows (all with ``None``) as slices of the result's batches."""
        out: list[pa.RecordBatch] = []
        while size is None or size > 0:
            batch = self._next_batch()
            if batch is None:
                break
            count = batch.num_rows - self._offset if size is None else min(size, batch.num_rows - self._offset)
            out.append(batch.slice(self._offset, count))
            self._offset += count
            if size is not None:
                size -= count
        return out

    def fetch_arrow_table(self) -> pa.Table:
        """The rows not fetched yet, as one Arrow table."""
        batches = self._take(None)
        assert self._plan is not None
        return pa.Table.from_batches(batches, schema=self._plan.schema)

    def fetchone(self) -> tuple | None:
        rows = self.fetchmany(1)
        return rows[0] if rows else None

    def fetchmany(self, size: int | None = None) -> list[tuple]:
        return [row for batch in self._take(size or self.arraysize) for row in _rows(batch)]

    def fetchall(self) -> list[tuple]:
        return [row for batch in self._take(None) for row in _rows(batch)]


def _describe(field: pa.Field) -> tuple:
    """A ``description`` entry: name, type code (the Arrow type's name, see the type objects),
    display size, internal size, precision, scale (decimals), null_ok."""
    dtype = field.type
    precision = dtype.precision if pa.types.is_decimal(dtype) else None
    scale = dtype.scale if pa.types.is_decimal(dtype) else None
    return (field.name, str(dtype), None, None, precision, scale, field.nullable)


def _rows(batch: pa.RecordBatch) -> Iterator[tuple]:
    """Python rows of a batch (DB-API hands out Python values; this is the one conversion)."""
    return zip(*(column.to_pylist() for column in batch.columns))


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
