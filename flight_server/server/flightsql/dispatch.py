"""Flight SQL on the service's port: recognising Flight SQL messages and answering them.

The service hands a descriptor command, ticket, action or DoPut descriptor here when it is a
Flight SQL message (``google.protobuf.Any`` with an ``arrow.flight.protocol.sql.*`` type URL);
JSON commands and ``hf1`` tickets never are. A Flight SQL message the server does not implement
(or does not even declare) answers UNIMPLEMENTED naming it.

Catalog commands use their own packed command as the endpoint ticket (the usual Flight SQL
convention); statements are answered by :mod:`.statements`; prepared statements are stateless
signed handles (``query.tickets.PreparedHandle``).
"""

from __future__ import annotations

from typing import Any, Iterator, TypeVar

import pyarrow as pa
import pyarrow.flight as flight
from google.protobuf.message import DecodeError, Message

from catalog.errors import InvalidQueryError, InvalidTicketError, shown
from flight_server.protocol import pack, session, sql, type_name, unpack
from flight_server.server.flightsql import catalog
from flight_server.server.flightsql.single_endpoint import single_endpoint
from flight_server.server.flightsql.statements import Statements
from flight_server.server.query.queries import Call
from flight_server.server.query.tickets import PreparedHandle
from flight_server.server.security.limits import LimitExceededError, Limits

M = TypeVar("M", bound=Message)
SQL_PACKAGE = "arrow.flight.protocol.sql."
CREATE_PREPARED_STATEMENT = "CreatePreparedStatement"
CLOSE_PREPARED_STATEMENT = "ClosePreparedStatement"
#: Flight's session actions, which Flight SQL drivers send (ADBC: CloseSession on every close)
CLOSE_SESSION = "CloseSession"
GET_SESSION_OPTIONS = "GetSessionOptions"
#: Flight SQL action types answered here (the others, e.g. BeginTransaction or SetSessionOptions,
#: answer UNIMPLEMENTED as unknown actions, naming the action)
ACTIONS: dict[str, str] = {
    CREATE_PREPARED_STATEMENT: "Flight SQL: prepare a read-only SQL query (stateless signed handle).",
    CLOSE_PREPARED_STATEMENT: "Flight SQL: close a prepared statement (nothing is kept on the server).",
    CLOSE_SESSION: "Flight: close the session (closed at once: the server keeps no session).",
    GET_SESSION_OPTIONS: "Flight: the session's options (none: the server keeps no session).",
}


def flight_sql_message(data: bytes, limits: Limits) -> Message | None:
    """The Flight SQL message ``data`` holds; ``None`` when it is not a Flight SQL message at all.

    Raises:
        NotImplementedError: an ``arrow.flight.protocol.sql.*`` type this server does not declare.
        ValueError: a declared type whose payload does not decode.
    """
    name = type_name(data)
    if name is None or not name.startswith(SQL_PACKAGE):
        return None
    limits.check_body(data, "Flight SQL message")
    message = unpack(data)
    if message is None:
        raise NotImplementedError(f"Flight SQL message {shown(name, 96)} is not implemented by hudi-flight")
    return message


def _unimplemented(message: Message) -> NotImplementedError:
    return NotImplementedError(
        f"Flight SQL {message.DESCRIPTOR.name} is not implemented by hudi-flight (a read-only SQL server)"
    )


def _bound_values(prepared: PreparedHandle, count: int) -> list[Any] | None:
    """The values bound to ``prepared``; a handle of a query with parameters but nothing bound is
    refused naming the flow (clients that execute the handle they prepared instead of the one the
    DoPut answered with, such as flightsql-dbapi 0.2, end up here)."""
    values = prepared.parameter_values()
    if values is None and count:
        raise InvalidQueryError(
            f"the prepared statement takes {count} parameter(s) and none are bound to this handle: bind them "
            "with DoPut and execute the handle its DoPutPreparedStatementResult returns (handles are stateless)"
        )
    return values


def _no_transactions(message: Message) -> None:
    if message.HasField("transaction_id"):
        raise NotImplementedError("Flight SQL transactions are not implemented by hudi-flight (read-only)")


class FlightSqlService:
    """The Flight SQL front end: each method answers one RPC through the call's query path."""

    def __init__(self, statements: Statements):
        self.statements = statements

    def stop(self) -> None:
        """Interrupt every running SQL query (the server is shutting down)."""
        self.statements.engine.stop_all()

    # -- GetFlightInfo / GetSchema ---------------------------------------------------------
    def get_flight_info(self, call: Call, descriptor: flight.FlightDescriptor, message: Message) -> flight.FlightInfo:
        if isinstance(message, catalog.METADATA_COMMANDS):
            endpoint = flight.FlightEndpoint(descriptor.command, [])
            return flight.FlightInfo(catalog.result_schema(message), descriptor, [endpoint], -1, -1)
        one = single_endpoint(call.context)
        if isinstance(message, sql.CommandStatementQuery):
            _no_transactions(message)
            return self.statements.flight_info(call, descriptor, message.query, None, single_endpoint=one)
        if isinstance(message, sql.CommandPreparedStatementQuery):
            prepared = self._prepared(call, message.prepared_statement_handle)
            return self.statements.flight_info(
                call,
                descriptor,
                prepared.sql,
                _bound_values(prepared, self.statements.placeholder_count(prepared.sql)),
                prepared,
                single_endpoint=one,
            )
        raise _unimplemented(message)

    def get_schema(self, call: Call, message: Message) -> flight.SchemaResult:
        if isinstance(message, catalog.METADATA_COMMANDS):
            return flight.SchemaResult(catalog.result_schema(message))
        if isinstance(message, sql.CommandStatementQuery):
            _no_transactions(message)
            return flight.SchemaResult(self.statements.result_schema(call, message.query, None))
        if isinstance(message, sql.CommandPreparedStatementQuery):
            try:
                prepared = self._prepared(call, message.prepared_statement_handle)
            except InvalidTicketError as err:
                # pyarrow's GetSchema sends Flight status errors as UNKNOWN with a traceback
                raise InvalidQueryError(f"invalid prepared statement handle: {err}") from err
            values = prepared.parameter_values()
            if values is None:
                values = [None] * self.statements.placeholder_count(prepared.sql)
            return flight.SchemaResult(self.statements.result_schema(call, prepared.sql, values, prepared))
        raise _unimplemented(message)

    # -- DoGet -------------------------------------------------------------------------------
    def do_get(self, call: Call, message: Message) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
        """Schema and batches of a Flight SQL ticket."""
        if isinstance(message, catalog.METADATA_COMMANDS):
            table = catalog.result(call, message)
            return table.schema, iter(table.to_batches())
        if isinstance(message, sql.TicketStatementQuery):
            return self.statements.stream(call, message.statement_handle)
        raise _unimplemented(message)

    # -- DoAction ----------------------------------------------------------------------------
    def do_action(self, call: Call, action_type: str, body: bytes) -> list[bytes]:
        if action_type == CREATE_PREPARED_STATEMENT:
            request = _action_body(call, body, sql.ActionCreatePreparedStatementRequest)
            _no_transactions(request)
            return [pack(self._create(call, request.query))]
        if action_type == CLOSE_PREPARED_STATEMENT:
            # Handles are stateless: nothing to release. The body must still be the right message.
            _action_body(call, body, sql.ActionClosePreparedStatementRequest)
            return []
        if action_type == CLOSE_SESSION:
            _session_body(call, body, session.CloseSessionRequest)
            return [session.CloseSessionResult(status=session.CloseSessionResult.CLOSED).SerializeToString()]
        if action_type == GET_SESSION_OPTIONS:
            _session_body(call, body, session.GetSessionOptionsRequest)
            return [session.GetSessionOptionsResult().SerializeToString()]
        raise NotImplementedError(f"Flight SQL action {shown(action_type, 96)} is not implemented by hudi-flight")

    def _create(self, call: Call, text: str) -> sql.ActionCreatePreparedStatementResult:
        """Analyse now: refusals, unknown tables and rights fail at prepare time, as clients
        expect. The answer carries the result schema (the JDBC driver takes a statement without
        one for an update) and the parameters' types (it binds only into declared parameters)."""
        schema = self.statements.result_schema(call, text, [None] * self.statements.placeholder_count(text))
        parameters = self.statements.parameter_schema(call, text)
        handle = call.issue(PreparedHandle(call.owner, text))
        return sql.ActionCreatePreparedStatementResult(
            prepared_statement_handle=handle,
            dataset_schema=self.statements.infos.serialized(schema),
            parameter_schema=parameters.serialize().to_pybytes() if len(parameters) else b"",
        )

    # -- DoPut -------------------------------------------------------------------------------
    def do_put(
        self,
        call: Call,
        message: Message,
        reader: flight.MetadataRecordBatchReader,
        writer: flight.FlightMetadataWriter,
    ) -> None:
        if not isinstance(message, sql.CommandPreparedStatementQuery):
            if isinstance(message, (sql.CommandStatementUpdate, sql.CommandPreparedStatementUpdate)):
                raise NotImplementedError("hudi-flight is read-only: Flight SQL updates are not implemented")
            raise _unimplemented(message)
        prepared = self._prepared(call, message.prepared_statement_handle)
        batch = _parameters(reader, call.max_body_bytes)
        bound = call.issue(PreparedHandle(prepared.user, prepared.sql, batch))
        result = sql.DoPutPreparedStatementResult(prepared_statement_handle=bound)
        # the app_metadata is the bare message (clients unmarshal it directly, not as an Any)
        writer.write(pa.py_buffer(result.SerializeToString()))

    def _prepared(self, call: Call, handle: bytes) -> PreparedHandle:
        """A genuine, unexpired prepared statement handle (its user is checked when it is analysed).

        A client sends each handle back to the process that issued it (the prepared handle with
        every DoPut, the bound one with the GetFlightInfo that follows): the codec remembers the
        tickets it issued, so redeeming one is a look-up; any other is verified and parsed."""
        return call.redeem(handle, (PreparedHandle,))


def _action_body(call: Call, body: bytes, cls: type[M]) -> M:
    call.check_body(body, "action body")
    message = unpack(body)
    if not isinstance(message, cls):
        raise ValueError(f"action body must be a packed {cls.__name__}")
    return message


def _session_body(call: Call, body: bytes, cls: type[M]) -> M:
    """A session action's body: the bare serialized request (Flight's session actions do not pack
    it in an ``Any``)."""
    call.check_body(body, "action body")
    message = cls()
    try:
        message.ParseFromString(body)
    except DecodeError:
        raise ValueError(f"action body must be a serialized {cls.__name__}") from None
    return message


def _parameters(reader: flight.MetadataRecordBatchReader, limit: int) -> pa.RecordBatch | None:
    """The one parameter row of a DoPut (``None``: no rows), bounded by ``max_body_bytes``."""
    batches, size = [], 0
    for chunk in reader:
        if chunk.data is None:
            continue
        size += chunk.data.nbytes
        if size > limit:
            raise LimitExceededError("max_body_bytes", limit, "bound parameters are larger")
        batches.append(chunk.data)
    rows = sum(b.num_rows for b in batches)
    if rows == 0:
        return None
    if rows > 1:
        raise ValueError(f"a query binds one parameter row per execution, got {rows} rows")
    batch = batches[0] if len(batches) == 1 else pa.Table.from_batches(batches).combine_chunks().to_batches()[0]
    # the size of the IPC stream the bound handle carries (schema, batch, end-of-stream marker),
    # without writing the stream here as well
    if batch.schema.serialize().size + pa.ipc.get_record_batch_size(batch) + 8 > limit:
        raise LimitExceededError("max_body_bytes", limit, "bound parameters are larger")
    return batch


__all__ = ["ACTIONS", "FlightSqlService", "flight_sql_message"]
