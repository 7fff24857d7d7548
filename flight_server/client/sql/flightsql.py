"""The client half of Arrow Flight SQL, over a :class:`HudiFlightClient` session.

Every request is a Flight SQL protobuf message (``flight_server.protocol``) packed into a
``google.protobuf.Any``; results come back as planned endpoints, which the session fetches in
parallel (``HudiFlightClient.stream``). Nothing here runs SQL: the server does.

* a statement without parameters: ``GetFlightInfo(CommandStatementQuery)``;
* a statement with parameters (``?`` placeholders): ``DoAction(CreatePreparedStatement)``, the
  parameter row sent with ``DoPut`` on ``CommandPreparedStatementQuery`` (the server may answer
  with a new handle, ``DoPutPreparedStatementResult``, which is then used), ``GetFlightInfo`` on
  that command, and ``DoAction(ClosePreparedStatement)``;
* the catalog: ``CommandGetDbSchemas``, ``CommandGetTables`` (``include_schema`` for columns) and
  ``CommandGetPrimaryKeys``.

Errors are the session's builtins (``ValueError`` for a refused query, ``LookupError`` for an
unknown table, ...), each carrying the server's message.
"""

from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa
import pyarrow.flight as flight
from google.protobuf.message import DecodeError, Message

from flight_server.client.session import HudiFlightClient, QueryPlan, translated_errors
from flight_server.protocol import pack, sql, unpack

CREATE_PREPARED_STATEMENT = "CreatePreparedStatement"
CLOSE_PREPARED_STATEMENT = "ClosePreparedStatement"


def _descriptor(message: Message) -> flight.FlightDescriptor:
    return flight.FlightDescriptor.for_command(pack(message))


def statement_plan(client: HudiFlightClient, query: str, parameters: Sequence[Any] | None = None) -> QueryPlan:
    """Plan ``query`` on the server: its result schema and endpoints.

    With ``parameters`` (one value per ``?``) the query runs as a prepared statement, the values
    travelling as one Arrow row: they never become SQL text on the client.
    """
    if parameters is None:
        return client.plan_descriptor(_descriptor(sql.CommandStatementQuery(query=query)), "SQL query")
    created = _action(client, CREATE_PREPARED_STATEMENT, sql.ActionCreatePreparedStatementRequest(query=query))
    if not isinstance(created, sql.ActionCreatePreparedStatementResult):
        raise ValueError(f"{client.uri} answered CreatePreparedStatement without a prepared statement")
    handle = created.prepared_statement_handle
    try:
        handle = _bind(client, handle, parameter_batch(parameters, created.parameter_schema))
        command = sql.CommandPreparedStatementQuery(prepared_statement_handle=handle)
        return client.plan_descriptor(_descriptor(command), "prepared SQL query")
    finally:
        close = sql.ActionClosePreparedStatementRequest(prepared_statement_handle=handle)
        _action(client, CLOSE_PREPARED_STATEMENT, close)


def parameter_batch(parameters: Sequence[Any], schema_ipc: bytes = b"") -> pa.RecordBatch:
    """One row holding ``parameters`` (columns ``"0"``, ``"1"``, ...), each cast to the type the
    server's parameter schema gives it when it sent one and the value converts exactly (else the
    value keeps its own type: the server binds values of any type)."""
    arrays = []
    for i, value in enumerate(parameters):
        try:
            arrays.append(pa.array([value]))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as err:
            raise TypeError(f"parameter {i + 1} ({type(value).__name__}) has no Arrow type") from err
    batch = pa.RecordBatch.from_arrays(arrays, names=[str(i) for i in range(len(arrays))])
    if schema_ipc:
        schema = pa.ipc.read_schema(pa.py_buffer(schema_ipc))
        if len(schema) == batch.num_columns:
            columns = [_cast_exactly(column, field.type) for column, field in zip(batch.columns, schema)]
            batch = pa.RecordBatch.from_arrays(columns, names=schema.names)
    return batch


def _cast_exactly(column: pa.Array, dtype: pa.DataType) -> pa.Array:
    try:
        return column.cast(dtype)  # a safe cast: it fails rather than change the value
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return column


def _bind(client: HudiFlightClient, handle: bytes, batch: pa.RecordBatch) -> bytes:
    """DoPut the parameter row; the handle to execute (the server's new one, if it sent one)."""
    command = sql.CommandPreparedStatementQuery(prepared_statement_handle=handle)
    with translated_errors(client.uri, "binding parameters"):
        writer, results = client.flight.do_put(_descriptor(command), batch.schema, client.options)
        try:
            writer.write_batch(batch)
            writer.done_writing()
            metadata = results.read()
        finally:
            writer.close()
    if not metadata:
        return handle
    data = metadata.to_pybytes()
    # The specification sends the message itself; a packed Any is accepted too.
    answer = unpack(data)
    if answer is None:
        answer = sql.DoPutPreparedStatementResult()
        try:
            answer.ParseFromString(data)
        except DecodeError:
            return handle
    if isinstance(answer, sql.DoPutPreparedStatementResult) and answer.HasField("prepared_statement_handle"):
        return answer.prepared_statement_handle
    return handle


def _action(client: HudiFlightClient, name: str, request: Message) -> Message | None:
    with translated_errors(client.uri, f"Flight SQL {name}"):
        results = list(client.flight.do_action(flight.Action(name, pack(request)), client.options))
    return unpack(results[0].body.to_pybytes()) if results else None


# -- catalog -----------------------------------------------------------------------------------


def like_literal(text: str) -> str:
    """``text`` as a LIKE pattern matching only itself."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def catalog_rows(client: HudiFlightClient, command: Message) -> pa.Table:
    """The result of a Flight SQL catalog command."""
    plan = client.plan_descriptor(_descriptor(command), f"Flight SQL {command.DESCRIPTOR.name}")
    return client.stream(plan).read_all()


def db_schemas(client: HudiFlightClient) -> list[str]:
    rows = catalog_rows(client, sql.CommandGetDbSchemas())
    return sorted(rows.column("db_schema_name").to_pylist())


def tables(client: HudiFlightClient, namespace: str) -> list[str]:
    rows = catalog_rows(client, sql.CommandGetTables(db_schema_filter_pattern=like_literal(namespace)))
    return sorted(rows.column("table_name").to_pylist())


def table_schema(client: HudiFlightClient, namespace: str, table: str) -> pa.Schema | None:
    """The Arrow schema of ``namespace.table`` (``None``: no such table, or not readable)."""
    command = sql.CommandGetTables(
        db_schema_filter_pattern=like_literal(namespace),
        table_name_filter_pattern=like_literal(table),
        include_schema=True,
    )
    rows = catalog_rows(client, command).to_pylist()
    found = [r for r in rows if r["db_schema_name"] == namespace and r["table_name"] == table]
    if not found:
        return None
    return pa.ipc.read_schema(pa.py_buffer(found[0]["table_schema"]))


def quoted(name: str) -> str:
    """``name`` as a double-quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def metadata_table(client: HudiFlightClient, table: str, name: str) -> pa.Table:
    """The metadata table ``name`` (``timeline``, ``health``...) of ``table`` (``ns.t``), read
    with SQL as ``ns."t$name"``."""
    namespace, _, short = table.partition(".")
    plan = statement_plan(client, f"SELECT * FROM {quoted(namespace)}.{quoted(short + '$' + name)}")
    return client.stream(plan).read_all()


def primary_key(client: HudiFlightClient, namespace: str, table: str) -> list[str]:
    rows = catalog_rows(client, sql.CommandGetPrimaryKeys(db_schema=namespace, table=table)).to_pylist()
    return [r["column_name"] for r in sorted(rows, key=lambda r: r["key_sequence"])]


__all__ = [
    "catalog_rows",
    "db_schemas",
    "like_literal",
    "metadata_table",
    "parameter_batch",
    "primary_key",
    "quoted",
    "statement_plan",
    "table_schema",
    "tables",
]
