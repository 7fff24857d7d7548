"""The Arrow Flight service: plans Hudi queries into weighted, signed endpoints and streams them.

This module holds the RPCs only. A query's path: ``get_flight_info`` parses the command
(``wire``), opens the table state (``tables``), plans it with the library's planner, and signs
one ticket per split carrying the pinned options and the split (``tickets``); ``do_get``
verifies a ticket, rebuilds the read context from the same table state and options, and
streams :func:`catalog.read.split_reader.read_split`. Errors are mapped in ``errors``.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.flight as flight

from catalog.errors import InvalidQueryError, UnknownTableError
from catalog.format.log_file import collecting_corrupt_blocks
from catalog.plan.options import ReadOptions
from catalog.plan.planner import ScanPlan, plan
from catalog.plan.splits import FooterCache
from catalog.read.split_reader import read_splits
from catalog.state import TableState
from catalog.table.files import Split
from flight_server.server.actions import HANDLERS
from flight_server.server.cache.disk_cache import DiskCache
from flight_server.server.cache.split_cache import SplitResultCache
from flight_server.server.cache.tables import TableCache
from flight_server.server.cluster.membership import HEARTBEAT_PURPOSE, Membership
from flight_server.server.config import ServerConfig
from flight_server.server.errors import flight_errors, schema_errors, stream_errors
from flight_server.server.flightsql.dispatch import ACTIONS as SQL_ACTIONS
from flight_server.server.flightsql.dispatch import FlightSqlService, flight_sql_message
from flight_server.server.flightsql.single_endpoint import SINGLE_ENDPOINT_KEY, SingleEndpointMiddlewareFactory
from flight_server.server.ops.call_log import note
from flight_server.server.ops.operations import Operations
from flight_server.server.query.streams import COMPRESSION_KEY, CompressionMiddlewareFactory, write_options
from flight_server.server.query.wire import (
    ACTIONS,
    QueryCommand,
    TicketBody,
    endpoint_metadata,
    parse_action,
    parse_command,
    query_metadata,
    split_from_json,
    split_to_json,
)
from flight_server.server.registry import Registry, TableEntry, parse_identifier
from flight_server.server.security.auth import MIDDLEWARE_KEY as AUTH_KEY
from flight_server.server.security.auth import HandshakeEnabled, authentication, caller_name
from flight_server.server.security.limits import MIDDLEWARE_KEY, CallerMiddlewareFactory, Limits, StreamGate, caller_of
from flight_server.server.security.state_files import private_dir, private_sqlite
from flight_server.server.security.tickets import TicketSigner, configured_signer
from flight_server.server.security.tls import check_locations
from flight_server.server.security.users import ANONYMOUS, UserStore

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


@functools.lru_cache(maxsize=16)  # one expiry per plan, shared by all its endpoints
def _timestamp(epoch_seconds: float) -> pa.TimestampScalar:
    return pa.scalar(int(epoch_seconds * 1_000_000), type=pa.timestamp("us", tz="UTC"))


class HudiFlightServer(flight.FlightServerBase):
    """Flight front end of the catalog registry (interfaces.md section 2).

    Args:
        config: server settings (address, splits, tickets, warehouses).
        registry: the catalog; built from ``config.resolved_catalog_url`` when omitted.
        signer: ticket signer; built from the configured or persisted secret when omitted.
        discover: scan the warehouses now and every ``refresh_interval_seconds`` (``False``:
            workers, and all but one process of ``serve --processes N``).
        location: where to listen instead of ``config.location`` (a supervised process).
    """

    def __init__(
        self,
        config: ServerConfig | None = None,
        registry: Registry | None = None,
        signer: TicketSigner | None = None,
        discover: bool = True,
        location: str | None = None,
        **kwargs: Any,
    ):
        self.config = config or ServerConfig()
        private_dir(self.config.state_path)
        self.ops = Operations(self.config)
        if registry is None:
            private_sqlite(self.config.resolved_catalog_url)
            registry = Registry(self.config.resolved_catalog_url)
        self.registry = registry
        if signer is None:
            signer = configured_signer(
                self.config.secret, self.config.resolved_secret_file, self.config.ticket_ttl_seconds
            )
        self.signer = signer
        self.users = UserStore(registry.engine)
        auth = authentication(self.config, self.users, signer)  # refuses an exposed server without credentials
        self.access = auth.access
        kwargs.setdefault("middleware", {}).update(
            {MIDDLEWARE_KEY: CallerMiddlewareFactory(), AUTH_KEY: auth, COMPRESSION_KEY: CompressionMiddlewareFactory(),
             SINGLE_ENDPOINT_KEY: SingleEndpointMiddlewareFactory()}
        )
        kwargs["middleware"].update(self.ops.middleware())
        kwargs.setdefault("auth_handler", HandshakeEnabled())
        tls = self.config.tls()
        check_locations(self.config.locations, tls is not None)
        if tls is not None:
            kwargs.update(tls.server_kwargs())
        listen = location or self.config.location
        try:
            super().__init__(listen, **kwargs)
        except pa.ArrowException as err:
            raise OSError(f"cannot listen on {listen} (address in use?)") from err
        self.split_options = self.config.split_options()
        self.ipc_options = self.config.ipc_options()
        self.limits = self.config.limits()
        self.streams = StreamGate(self.limits.max_streams_per_caller)
        self.footers = FooterCache(self.limits.footer_cache_bytes, self.ops.cache_listener)
        self.policy = self.config.storage_policy()
        disk = self.config.disk_cache_bytes
        self.tables = TableCache(
            self.config.table_cache_bytes,
            self.policy.options_for,
            self.ops.cache_listener,
            DiskCache(self.config.state_path / "disk-cache", disk, self.ops.cache_listener) if disk else None,
            self.policy.check_registered,
        )
        self.split_results = SplitResultCache(
            self.config.split_cache_bytes, self.config.split_cache_entry_bytes, self.ops.cache_listener
        )
        self.flight_sql = FlightSqlService(self, self.config.sql_engine_settings())
        self.started = time.time()
        self._stop = threading.Event()
        self._location_load = {loc: 0.0 for loc in self.config.locations}
        self._location_lock = threading.Lock()
        self.cluster: Membership | None = None  # the live workers, on a coordinator
        if self.config.role == "coordinator":
            self.cluster = Membership(
                signer.derived(HEARTBEAT_PURPOSE),
                self.config.heartbeat_timeout_seconds,
                self.config.state_path / "workers",  # shared by the coordinator's processes
            )
        if self.config.warehouses and discover:
            self.scan_warehouses()
            if self.config.refresh_interval_seconds > 0:
                threading.Thread(target=self._rescan_loop, name="hudi-warehouse-scan", daemon=True).start()
        self.ops.start()

    # -- catalog -------------------------------------------------------------------------
    def scan_warehouses(self) -> int:
        """Register the tables of every configured warehouse; returns how many there are."""
        found = 0
        for warehouse in self.config.warehouses:
            options = self.policy.options_for(warehouse, None)
            found += len(self.registry.discover(warehouse, options or None, store_options=False))
        # Cached table states stay: they are keyed by (table, URI) and checked on every plan.
        return found

    def _rescan_loop(self) -> None:
        while not self._stop.wait(self.config.refresh_interval_seconds):
            try:
                self.scan_warehouses()
            except Exception:  # a transient storage error must not kill the timer
                log.exception("warehouse re-scan failed")

    def shutdown(self) -> None:
        self._stop.set()
        self.ops.stopping()
        super().shutdown()
        self.ops.close()

    def open_table(self, identifier: str, instant: str | None = None) -> tuple[TableEntry, TableState]:
        """The table's entry and its state now (or any state holding ``instant``, see TableCache)."""
        entry = self.registry.load_table(identifier)
        return entry, self.tables.get(entry, instant)

    # -- who may do what -------------------------------------------------------------------
    def authorize(self, context: flight.ServerCallContext, right: str, table: str | None = None) -> str:
        """The caller's user name, once it is known to hold ``right`` (``"read"`` or ``"admin"``)
        on ``table`` (``None``: the catalog as a whole).

        Every RPC that plans, reads or lists a table, or changes the catalog, goes through this
        one check (interfaces.md section 6; the rules are in ``access``).

        Raises:
            flight.FlightUnauthenticatedError: the caller is not (or no longer) known.
            flight.FlightUnauthorizedError: the caller lacks the right.
        """
        return self.access.authorize(caller_name(context), right, table)

    def readable(self, context: flight.ServerCallContext, tables: list[str]) -> list[str]:
        """The subset of ``tables`` (identifiers) the caller may read, for listings."""
        return self.access.readable(caller_name(context), tables)

    def visible_namespaces(self, context: flight.ServerCallContext, namespaces: list[str]) -> list[str]:
        """The namespaces listed to the caller (those it holds a grant in)."""
        return self.access.visible_namespaces(caller_name(context), namespaces)

    # -- planning ------------------------------------------------------------------------
    def _plan(self, state: TableState, options: ReadOptions) -> ScanPlan:
        return plan(state, options, self.split_options, self.footers)

    def _locations(self, weight: float, key: str) -> list[str]:
        """Where an endpoint is read. On a coordinator: the live workers ranked first and second
        for the file group ``key`` (cluster.rendezvous). Else the configured ``locations``:
        least-loaded first, the next one as a retry target. Empty: this server."""
        if self.cluster is not None:
            return self.cluster.locations(key)
        if not self._location_load:
            return []
        with self._location_lock:
            ranked = sorted(self._location_load, key=self._location_load.__getitem__)
            self._location_load[ranked[0]] += weight
        return ranked[:2]

    def _endpoint(
        self, body: TicketBody, expires_at: float, metadata: bytes, weight: float, key: str
    ) -> flight.FlightEndpoint:
        ticket = self.signer.sign(body.to_json(), expires_at)
        return flight.FlightEndpoint(
            ticket, self._locations(weight, key), expiration_time=_timestamp(expires_at), app_metadata=metadata
        )

    def plan_query(
        self, command: QueryCommand, user: str = ANONYMOUS, context: flight.ServerCallContext | None = None
    ) -> tuple[pa.Schema, list[flight.FlightEndpoint], int, int]:
        """Schema, endpoints, estimated rows and bytes of a query; the tickets name ``user``
        (the caller :meth:`authorize` returned), the only one who may read them. The plan is
        noted in ``context``'s call log line."""
        deadline = self.limits.deadline()
        with self.ops.planning():
            entry, state = self.open_table(command.table)
            scan = self._plan(state, command.options)
            splits = list(deadline.bounded(iter(scan.splits)))
        self.tables.measure(entry, state)
        if context is not None:
            note(context, table=entry.identifier, instant=scan.context.instant, endpoints=len(splits))
        if scan.context.instant is None:  # a table without commits
            return scan.schema, [], 0, 0
        expires_at = self.signer.expiry()
        wire = scan.options.to_json()
        rows = sum(s.estimated_rows for s in splits)
        nbytes = sum(s.bytes for s in splits)
        instant = scan.context.instant
        if scan.options.limit is not None:
            # A limit is only defined over the union: one endpoint reads the whole query.
            body = TicketBody(entry.identifier, entry.base_uri, instant, wire, user=user)
            meta = query_metadata(splits, scan.options.limit)
            endpoint = self._endpoint(body, expires_at, meta, 1.0, entry.identifier)
            return scan.schema, [endpoint], min(rows, scan.options.limit), nbytes
        endpoints = [
            self._endpoint(
                TicketBody(entry.identifier, entry.base_uri, instant, wire, split_to_json(s), user),
                expires_at,
                endpoint_metadata(s),
                s.weight,
                f"{entry.identifier}/{s.file_slice.partition}/{s.file_slice.file_id}",
            )
            for s in splits
        ]
        return scan.schema, endpoints, rows, nbytes

    # -- Flight RPCs ---------------------------------------------------------------------
    @flight_errors
    def get_flight_info(
        self, context: flight.ServerCallContext, descriptor: flight.FlightDescriptor
    ) -> flight.FlightInfo:
        message = self._sql_command(descriptor)
        if message is not None:
            return self.flight_sql.get_flight_info(context, descriptor, message)
        command = _descriptor_command(descriptor, self.limits)
        user = self.authorize(context, "read", command.table)
        note(context, user=user)
        schema, endpoints, rows, nbytes = self.plan_query(command, user, context)
        return flight.FlightInfo(schema, descriptor, endpoints, rows, nbytes, ordered=False)

    @schema_errors
    def get_schema(self, context: flight.ServerCallContext, descriptor: flight.FlightDescriptor) -> flight.SchemaResult:
        message = self._sql_command(descriptor)
        if message is not None:
            return self.flight_sql.get_schema(context, message)
        command = _descriptor_command(descriptor, self.limits)
        note(context, user=self.authorize(context, "read", command.table), table=command.table)
        _, state = self.open_table(command.table)
        return flight.SchemaResult(self._plan(state, command.options).schema)

    @flight_errors
    def list_flights(self, context: flight.ServerCallContext, criteria: bytes) -> Iterator[flight.FlightInfo]:
        infos = []
        entries = self.registry.list_tables()
        readable = set(self.readable(context, [e.identifier for e in entries]))
        for entry in (e for e in entries if e.identifier in readable):
            descriptor = flight.FlightDescriptor.for_path(entry.namespace, entry.name)
            try:
                scan = self._plan(self.tables.get(entry), ReadOptions())
                splits: list[Split] = list(scan.splits)
            except Exception as err:  # one unreadable table must not hide the others
                log.warning("list_flights: skipping %s: %s", entry.identifier, err)
                continue
            rows = sum(s.estimated_rows for s in splits)
            nbytes = sum(s.bytes for s in splits)
            infos.append(flight.FlightInfo(scan.schema, descriptor, [], rows, nbytes))
        return iter(infos)

    @flight_errors
    def do_get(self, context: flight.ServerCallContext, ticket: flight.Ticket) -> flight.FlightDataStream:
        self.limits.check_ticket(ticket.ticket)
        message = flight_sql_message(ticket.ticket, self.limits)
        if message is not None:
            schema, sql_batches = self.flight_sql.do_get(context, message)
            return self._stream(context, caller_name(context), schema, sql_batches)
        body = TicketBody.from_json(self.signer.verify(ticket.ticket))
        user = self.authorize(context, "read", body.table)  # still holds the right (revokes count)
        if body.user != user:
            raise flight.FlightUnauthorizedError("ticket was issued to another caller")
        note(context, user=user, table=body.table, instant=body.instant)
        entry, state = self.open_table(body.table, body.instant)
        if entry.base_uri != body.uri:
            raise UnknownTableError(f"table {body.table} was re-registered elsewhere since planning; plan again")
        scan = self._plan(state, ReadOptions.from_json(body.command))
        if body.split is None:
            batches = read_splits(scan.context, scan.splits, scan.options.limit)
        else:
            batches = self.split_results.read(scan.context, split_from_json(body.split))
        return self._stream(context, user, scan.schema, batches)

    def _stream(
        self, context: flight.ServerCallContext, user: str, schema: pa.Schema, batches: Iterator[pa.RecordBatch]
    ) -> flight.FlightDataStream:
        """Stream ``batches`` to ``user``, counted against their concurrent-stream bound."""
        caller = caller_of(context) if user == ANONYMOUS else f"user:{user}"
        self.streams.acquire(caller)
        sized = _message_sized(self._until_cancelled(context, batches))
        notes = _with_corrupt_block_notes(self.ops.streamed(sized), schema)
        guarded = self.streams.guarded(caller, stream_errors(notes))
        return flight.GeneratorStream(schema, guarded, options=write_options(context, self.ipc_options))

    def _sql_command(self, descriptor: flight.FlightDescriptor) -> Any:
        """The Flight SQL message of a command descriptor (``None``: a JSON command or a path)."""
        if descriptor.descriptor_type != flight.DescriptorType.CMD:
            return None
        return flight_sql_message(descriptor.command, self.limits)

    @staticmethod
    def _until_cancelled(
        context: flight.ServerCallContext, batches: Iterator[pa.RecordBatch]
    ) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            if context.is_cancelled():  # client went away: stop reading storage
                return
            yield batch

    def list_actions(self, context: flight.ServerCallContext) -> list[tuple[str, str]]:
        return [(name, description) for name, (_, description) in ACTIONS.items()] + list(SQL_ACTIONS.items())

    @flight_errors
    def do_action(self, context: flight.ServerCallContext, action: flight.Action) -> list[bytes]:
        raw = action.body.to_pybytes() if action.body is not None else b""
        if action.type in SQL_ACTIONS:
            return self.flight_sql.do_action(context, action.type, raw)
        body = parse_action(action.type, raw, self.limits)
        return [json.dumps(HANDLERS[action.type](self, body, context), default=str).encode()]

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
        self.flight_sql.do_put(context, message, reader, writer)


#: gRPC clients other than pyarrow's (Go: the ADBC driver; Java: JDBC) refuse messages over 16 MiB
#: by default, so a stream never sends a record batch much larger than this
MAX_MESSAGE_BYTES = 8 << 20


def _message_sized(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The batches, each larger one cut into zero-copy slices of about ``MAX_MESSAGE_BYTES``."""
    for batch in batches:
        size = batch.nbytes
        if size <= MAX_MESSAGE_BYTES or batch.num_rows < 2:
            yield batch
            continue
        step = max(1, batch.num_rows * MAX_MESSAGE_BYTES // size)
        for start in range(0, batch.num_rows, step):
            yield batch.slice(start, step)


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
