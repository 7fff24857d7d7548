"""The Arrow Flight service: the RPCs, answered through the query path.

A query's path: ``get_flight_info`` parses the command (``query.wire``), checks the caller and
plans once through one call of :class:`~.query.queries.Queries`, which signs one ticket per split
(``query.tickets``); ``do_get`` redeems a ticket and streams the split with the read context
planning left in the plan cache. Flight SQL messages go to ``flightsql``, actions to ``actions``;
everything is built by ``app.compose``. Errors are mapped in ``errors``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.flight as flight
from google.protobuf.message import Message

from catalog.errors import InvalidQueryError
from catalog.format.log_file import collecting_corrupt_blocks, relay_corrupt_block_notes
from catalog.meta import check_narrowing, narrowed_schema
from catalog.plan.aggregates import aggregate_schema
from catalog.plan.options import ReadOptions
from flight_server.server.actions import HANDLERS
from flight_server.server.app import App, compose
from flight_server.server.config import ServerConfig
from flight_server.server.errors import flight_errors, schema_errors, stream_errors, translated
from flight_server.server.flightsql.dispatch import ACTIONS as SQL_ACTIONS
from flight_server.server.flightsql.dispatch import flight_sql_message
from flight_server.server.flightsql.names import hinted_unknown, meta_reference
from flight_server.server.ops.call_log import record_of
from flight_server.server.query.queries import Call
from flight_server.server.query.streams import write_options
from flight_server.server.query.wire import ACTIONS, QueryCommand, parse_action, parse_command
from flight_server.server.registry import Registry, parse_identifier
from flight_server.server.security.auth import HandshakeEnabled
from flight_server.server.security.budgets import CallKeys
from flight_server.server.security.limits import Limits
from flight_server.server.security.tickets import TicketSigner
from flight_server.server.security.tls import check_locations

log = logging.getLogger(__name__)


def _descriptor_command(descriptor: flight.FlightDescriptor, limits: Limits) -> QueryCommand:
    if descriptor.descriptor_type == flight.DescriptorType.CMD:
        return parse_command(descriptor.command, limits)
    limits.check_body(b"".join(p if isinstance(p, bytes) else p.encode() for p in descriptor.path), "path")
    path = [p.decode() if isinstance(p, bytes) else p for p in descriptor.path]
    if len(path) == 2:
        identifier = f"{path[0]}.{path[1]}"
    elif len(path) == 1:
        identifier = path[0]
    else:
        raise InvalidQueryError(f"path descriptor must be [namespace, table], got {path}")
    parse_identifier(identifier)
    return QueryCommand(identifier)


def _no_aggregates(command: QueryCommand, meta: str) -> None:
    """A metadata table answers rows only."""
    if command.aggregates:
        raise InvalidQueryError(f"option 'aggregates' does not apply to the metadata table {meta!r}")


class HudiFlightServer(flight.FlightServerBase):
    """Flight front end of the catalog registry (docs/flight.md).

    Args:
        config: server settings (address, splits, tickets, warehouses).
        registry: the catalog; built from ``config.resolved_catalog_url`` when omitted.
        signer: ticket signer; built from the configured or persisted secret when omitted.
        discover: scan the warehouses now and every ``refresh_interval_seconds`` (``False``:
            workers, and all but one process of ``serve --processes N``).
        location: where to listen instead of ``config.location`` (a supervised process).
        app: the composed parts (``app.compose``); built from the arguments above when omitted.
        tls_in_front: the relay in front of this process ends the clients' TLS (``runtime.relay``):
            listen in cleartext at ``location`` (loopback), though TLS is configured.
    """

    def __init__(
        self,
        config: ServerConfig | None = None,
        registry: Registry | None = None,
        signer: TicketSigner | None = None,
        discover: bool = True,
        location: str | None = None,
        app: App | None = None,
        tls_in_front: bool = False,
        **kwargs: Any,
    ):
        app = app or compose(config, registry, signer, discover)
        self.app = app  # every part, as composed (operators and tests reach them here)
        composed = app.server_kwargs(tls_in_front)
        kwargs.setdefault("middleware", {}).update(composed.pop("middleware"))
        kwargs.update(composed)
        kwargs.setdefault("auth_handler", HandshakeEnabled())
        check_locations(self.app.config.locations, self.app.config.tls.files() is not None)
        listen = location or self.app.config.location
        app.load()
        try:
            super().__init__(listen, **kwargs)
        except pa.ArrowException as err:
            raise OSError(f"cannot listen on {listen} (address in use?)") from err
        self.ipc_options = self.app.config.ipc_options()
        app.start()

    @property
    def registry(self) -> Registry:
        """The catalog (``runtime.serve.Serving``: what a start-up callback reads)."""
        return self.app.registry

    def scan_warehouses(self) -> int:
        """Register the tables of every configured warehouse; returns how many there are."""
        return self.app.scan_warehouses()

    def serve(self) -> None:
        """Serve until :meth:`shutdown`.

        pyarrow's own ``serve`` catches SIGINT/SIGTERM in C++ and shuts the transport down, which
        waits for every running call, a SQL query without end included, before Python's handlers
        run. Here Python waits instead, so Ctrl-C or the CLI's SIGTERM raises out of this method
        and reaches :meth:`shutdown`, which interrupts running SQL before it waits for the calls.
        """
        stopped = threading.Event()

        def wait() -> None:
            self.wait()
            stopped.set()

        threading.Thread(target=wait, name="hudi-flight-serve", daemon=True).start()
        while not stopped.wait(0.5):
            pass

    def shutdown(self) -> None:
        self.app.stop.set()
        self.app.ops.stopping()
        self.app.flight_sql.stop()  # a running query would hold the shutdown until it ends
        super().shutdown()
        self.app.tables.close()
        self.app.close()

    # -- Flight RPCs ---------------------------------------------------------------------
    @flight_errors
    def get_flight_info(
        self, context: flight.ServerCallContext, descriptor: flight.FlightDescriptor
    ) -> flight.FlightInfo:
        call = self.app.queries.call(context)
        message = self._sql_command(descriptor)
        if message is not None:
            call.note(kind="sql plan")
            return self.app.flight_sql.get_flight_info(call, descriptor, message)
        call.note(kind="plan")
        command = _descriptor_command(descriptor, self.app.limits)
        meta = meta_reference(call, command.table)
        user = call.authorize("read", meta.identifier if meta is not None else command.table)
        with self.app.plans.held(CallKeys.of(context, user)), hinted_unknown(call, command.table):
            if meta is not None and meta.meta is not None:
                _no_aggregates(command, meta.meta)
                planned = self.app.queries.meta_endpoints(call, call.open_entry(meta.entry), meta.meta, command.options)
            elif command.aggregates:
                planned = self.app.queries.aggregate_endpoint(call, command.table, command.options, command.aggregates)
            else:
                planned = self.app.queries.endpoints(call, command.table, command.options)
            return planned.flight_info(descriptor)

    @schema_errors
    def get_schema(self, context: flight.ServerCallContext, descriptor: flight.FlightDescriptor) -> flight.SchemaResult:
        call = self.app.queries.call(context)
        message = self._sql_command(descriptor)
        if message is not None:
            return self.app.flight_sql.get_schema(call, message)
        command = _descriptor_command(descriptor, self.app.limits)
        meta = meta_reference(call, command.table)
        call.authorize("read", meta.identifier if meta is not None else command.table)
        call.note(table=command.table)
        if meta is not None and meta.meta is not None:
            _no_aggregates(command, meta.meta)
            check_narrowing(meta.meta, command.options)
            return flight.SchemaResult(narrowed_schema(meta.meta, command.options))
        with hinted_unknown(call, command.table):
            planned = call.plan(command.table, command.options)
        if command.aggregates:
            return flight.SchemaResult(aggregate_schema(command.aggregates, planned.context.table_schema))
        return flight.SchemaResult(planned.schema)

    @flight_errors
    def list_flights(self, context: flight.ServerCallContext, criteria: bytes) -> Iterator[flight.FlightInfo]:
        call = self.app.queries.call(context)
        infos = []
        entries = call.entries()
        readable = set(call.readable([e.identifier for e in entries]))
        for entry in (e for e in entries if e.identifier in readable):
            descriptor = flight.FlightDescriptor.for_path(entry.namespace, entry.name)
            try:
                call.open_entry(entry)
                planned = call.plan(entry.identifier, ReadOptions())
                splits = planned.splits()
                # the footers' count where it is exact (splits carry estimates: not every
                # footer is read to plan them)
                counted = planned.count()
            except Exception as err:  # one unreadable table must not hide the others, nor vanish
                reason = str(translated(err))
                log.warning("list_flights: %s cannot be read: %s", entry.identifier, reason)
                unreadable = json.dumps({"unreadable": reason}).encode()
                infos.append(flight.FlightInfo(pa.schema([]), descriptor, [], -1, -1, app_metadata=unreadable))
                continue
            rows = counted if counted is not None else sum(s.estimated_rows for s in splits)
            nbytes = sum(s.bytes for s in splits)
            infos.append(flight.FlightInfo(planned.schema, descriptor, [], rows, nbytes))
        return iter(infos)

    @flight_errors
    def do_get(self, context: flight.ServerCallContext, ticket: flight.Ticket) -> flight.FlightDataStream:
        self.app.limits.check_ticket(ticket.ticket)
        call = self.app.queries.call(context)
        message = flight_sql_message(ticket.ticket, self.app.limits)
        if message is not None:
            call.note(kind="sql")
            schema, batches = self.app.flight_sql.do_get(call, message)
            return self._stream(call, schema, batches)
        answer = self.app.queries.stream(call, ticket.ticket)
        if answer.few_rows:
            call.note(kind="point read")
            return self._at_once(call, answer.schema, answer.batches)
        call.note(kind="scan")
        return self._stream(call, answer.schema, answer.batches)

    def _at_once(self, call: Call, schema: pa.Schema, batches: Iterator[pa.RecordBatch]) -> flight.FlightDataStream:
        """A point read's few rows, read within the call (counted against the concurrent-stream
        bounds and admitted by the memory budget as a stream is) and handed to Arrow as one
        table: gRPC calls back into no Python generator. Its batches are slices of row groups
        the point-read cache holds, so handing them over holds no bytes the cache does not.
        Corrupt log blocks skipped on the way: then streamed as usual, with the notes."""
        keys = call.keys
        self.app.stream_memory.admit()
        with self.app.streams.held(keys), collecting_corrupt_blocks() as notes:
            read = list(batches)
        if notes:
            return self._stream(call, schema, _noted_again(read, notes))
        table = pa.Table.from_batches(list(self.app.ops.streamed(iter(read), record_of(call.context))), schema=schema)
        return flight.RecordBatchStream(table, options=write_options(call.context, self.ipc_options))

    def _stream(self, call: Call, schema: pa.Schema, batches: Iterator[pa.RecordBatch]) -> flight.FlightDataStream:
        """Stream ``batches`` to the caller, counted against the concurrent-stream bounds of the
        user, the connection and the process, and the process' memory budget for batches in flight."""
        keys, app = call.keys, self.app
        app.stream_memory.admit()
        app.streams.acquire(keys)
        sized = app.stream_memory.charged(_message_sized(self._until_cancelled(call.context, batches)), _batch_bytes)
        notes = _with_corrupt_block_notes(app.ops.streamed(sized, record_of(call.context)), schema)
        guarded = app.streams.guarded(keys, stream_errors(notes))
        return flight.GeneratorStream(schema, guarded, options=write_options(call.context, self.ipc_options))

    def _sql_command(self, descriptor: flight.FlightDescriptor) -> Message | None:
        """The Flight SQL message of a command descriptor (``None``: a JSON command or a path)."""
        if descriptor.descriptor_type != flight.DescriptorType.CMD:
            return None
        return flight_sql_message(descriptor.command, self.app.limits)

    @staticmethod
    def _until_cancelled(
        context: flight.ServerCallContext, batches: Iterator[pa.RecordBatch]
    ) -> Iterator[pa.RecordBatch]:
        """The batches until the client goes away (then storage is read no further).

        Asking is not free (gRPC polls its completion queue), so it is asked before a batch only
        once ``CANCEL_CHECK_SECONDS`` passed since the stream began or was last asked: a point
        read's single batch never asks, a long stream stops within that time of a cancel.
        """
        checked = time.monotonic()
        for batch in batches:
            now = time.monotonic()
            if now - checked >= CANCEL_CHECK_SECONDS:
                if context.is_cancelled():  # client went away: stop reading storage
                    return
                checked = now
            yield batch

    def list_actions(self, context: flight.ServerCallContext) -> list[tuple[str, str]]:
        return [(name, description) for name, (_, description) in ACTIONS.items()] + list(SQL_ACTIONS.items())

    @flight_errors
    def do_action(self, context: flight.ServerCallContext, action: flight.Action) -> list[bytes]:
        raw = action.body.to_pybytes() if action.body is not None else b""
        if action.type in SQL_ACTIONS:
            # preparing needs the schema, not the newest timeline: its execution checks that
            return self.app.flight_sql.do_action(self.app.queries.call(context, fresh=False), action.type, raw)
        call = self.app.queries.call(context)
        body = parse_action(action.type, raw, self.app.limits)
        call.note(kind=f"action {action.type}")  # a known action (parse_action refuses others)
        return [json.dumps(HANDLERS[action.type](self.app.actions, body, call), default=str).encode()]

    @flight_errors
    def do_put(
        self,
        context: flight.ServerCallContext,
        descriptor: flight.FlightDescriptor,
        reader: flight.MetadataRecordBatchReader,
        writer: flight.FlightMetadataWriter,
    ) -> None:
        message = self._sql_command(descriptor)
        if message is None:
            raise NotImplementedError("DoPut takes only Flight SQL prepared-statement parameters (read-only server)")
        self.app.flight_sql.do_put(self.app.queries.call(context), message, reader, writer)

    @flight_errors
    def do_exchange(
        self,
        context: flight.ServerCallContext,
        descriptor: flight.FlightDescriptor,
        reader: flight.MetadataRecordBatchReader,
        writer: flight.MetadataRecordBatchWriter,
    ) -> None:
        """Refused with a clean UNIMPLEMENTED (pyarrow's default sends its Python traceback)."""
        raise NotImplementedError("DoExchange is not implemented by hudi-flight (read-only server): use DoGet")


#: how often a stream asks whether its client went away (see HudiFlightServer._until_cancelled)
CANCEL_CHECK_SECONDS = 0.05

#: gRPC clients other than pyarrow's (Go: the ADBC driver; Java: JDBC) refuse messages over 16 MiB
#: by default, so a stream never sends a record batch much larger than this
MAX_MESSAGE_BYTES = 8 << 20


def _message_sized(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The batches, each larger one cut into zero-copy slices of about ``MAX_MESSAGE_BYTES``."""
    for batch in batches:
        if batch.num_rows < 2:  # nothing to cut (and a point read's row is not measured twice)
            yield batch
            continue
        size = batch.nbytes
        if size <= MAX_MESSAGE_BYTES:
            yield batch
            continue
        step = max(1, batch.num_rows * MAX_MESSAGE_BYTES // size)
        for start in range(0, batch.num_rows, step):
            yield batch.slice(start, step)


def _batch_bytes(batch: pa.RecordBatch) -> int:
    """The bytes a streamed batch holds, for the memory budget; never less than it holds.

    ``nbytes`` walks every column's offsets to size a slice exactly (~80 us for a one-row slice
    of a 17-column row group: a point read's answer); the size of the buffers the batch keeps
    alive is read off them, counts shared buffers once, and is never below ``nbytes``. It is
    charged while it is at most ``MAX_MESSAGE_BYTES``; a larger one is a slice of a large batch
    (``_message_sized``), whose own share is charged, so a scan's slices are not each charged
    the whole batch.
    """
    held = batch.get_total_buffer_size()
    return held if held <= MAX_MESSAGE_BYTES else batch.nbytes


def _noted_again(batches: list[pa.RecordBatch], notes: list[str]) -> Iterator[pa.RecordBatch]:
    """``batches`` read already, their corrupt-block ``notes`` collected again by the stream."""
    relay_corrupt_block_notes(notes)
    yield from batches


def _with_corrupt_block_notes(
    batches: Iterator[pa.RecordBatch], schema: pa.Schema
) -> Iterator[pa.RecordBatch | tuple[pa.RecordBatch, bytes]]:
    """The batches, with the log blocks skipped as corrupt while reading them (Hudi's rule, and a
    CorruptBlockWarning in the server log) told to the client too: as the ``app_metadata``
    ``{"corrupt_blocks": [message, ...]}`` of the next batch (an empty one at the end if needed).

    Notes are collected on the thread that advances the stream; a whole-query (``limit``)
    ticket's worker threads relay theirs to it (catalog.read.split_reader.read_splits).
    """
    it = iter(batches)
    while True:
        with collecting_corrupt_blocks() as notes:
            batch = next(it, None)
        if notes:
            meta = json.dumps({"corrupt_blocks": notes}).encode()
            yield (batch if batch is not None else pa.RecordBatch.from_pylist([], schema=schema)), meta
        elif batch is not None:
            yield batch
        if batch is None:
            return


__all__ = ["HudiFlightServer"]
