"""The Arrow Flight service: plans Hudi queries into weighted, signed endpoints and streams them.

Public: :class:`HudiFlightServer` and :func:`serve`. Domain errors are translated to Flight
status codes in one place (:func:`_flight_errors`): ``ValueError`` -> INVALID_ARGUMENT,
``KeyError`` -> NOT_FOUND, ``NotImplementedError`` -> UNIMPLEMENTED (pyarrow's own mapping),
ticket problems -> UNAUTHENTICATED, a table folder that vanished -> NOT_FOUND.
"""

from __future__ import annotations

import functools
import hmac
import json
import logging
import threading
import time
from typing import Any, Callable, Iterator

import pyarrow as pa
import pyarrow.flight as flight

from catalog.exceptions import InvalidQueryError, InvalidTicketError, UnknownTableError
from catalog.registry import Registry, TableEntry, parse_identifier
from catalog.splits import FooterCache, Split, SplitPlanner
from catalog.table import HudiTable

from .commands import (
    ACTIONS,
    QueryCommand,
    TicketBody,
    command_from_json,
    endpoint_metadata,
    parse_action,
    parse_command,
    query_metadata,
    split_from_json,
    split_to_json,
)
from .config import ServerConfig
from .tickets import TicketSigner, load_or_create_secret

log = logging.getLogger(__name__)


def _translated(err: Exception) -> Exception:
    """The exception a Flight client should see for ``err`` (``err`` itself when pyarrow maps it)."""
    if isinstance(err, InvalidTicketError):
        return flight.FlightUnauthenticatedError(str(err))
    if isinstance(err, FileNotFoundError):
        return UnknownTableError(f"table data not found: {err}")
    if isinstance(err, (flight.FlightError, ValueError, KeyError, NotImplementedError)):
        return err
    log.error("internal error", exc_info=err)
    return flight.FlightInternalError(f"{type(err).__name__}: {err}")


def _flight_errors(fn: Callable) -> Callable:
    """Translate errors that pyarrow would otherwise report as UNKNOWN, at the RPC boundary."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as err:
            new = _translated(err)
            if new is err:
                raise
            raise new from err

    return wrapper


def _stream_errors(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The same translation for errors raised while a do_get stream is being produced."""
    try:
        yield from batches
    except Exception as err:
        new = _translated(err)
        if new is err:
            raise
        raise new from err


def _descriptor_command(descriptor: flight.FlightDescriptor) -> QueryCommand:
    if descriptor.descriptor_type == flight.DescriptorType.CMD:
        return parse_command(descriptor.command)
    path = [p.decode() if isinstance(p, bytes) else p for p in descriptor.path]
    if len(path) == 2:
        identifier = f"{path[0]}.{path[1]}"
    elif len(path) == 1:
        identifier = path[0]
    else:
        raise InvalidQueryError(f"path descriptor must be [namespace, table], got {path}")
    parse_identifier(identifier)
    return QueryCommand(table=identifier)


def _timestamp(epoch_seconds: float) -> pa.TimestampScalar:
    return pa.scalar(int(epoch_seconds * 1_000_000), type=pa.timestamp("us", tz="UTC"))


def _pinned(command: QueryCommand, scan: Any) -> dict[str, Any]:
    """The command with its planned instant made explicit, so reading a ticket later (or on
    another server) sees the table as it was planned, whatever was committed since."""
    wire = command.to_json()
    if command.query_type != "incremental":
        wire.setdefault("as_of", scan.instant)
    elif command.end is None:
        # The incremental range compares completion times in table version 8+ (format doc 7.5).
        chosen = scan.table.timeline.instants_in_range(command.start, None)
        if chosen:
            use_completion = scan.table.table_version >= 8
            wire["end"] = max(i.completion_time if use_completion else i.requested_time for i in chosen)
    return wire


class BearerTokenMiddlewareFactory(flight.ServerMiddlewareFactory):
    """Optional authentication: every call must send ``authorization: Bearer <token>``.

    A missing or malformed header is UNAUTHENTICATED; a token that is not accepted is
    UNAUTHORIZED. Tickets stay signed either way (the token says who may call at all).
    """

    def __init__(self, tokens: list[str]):
        self._tokens = [t.encode() for t in tokens]

    def start_call(self, info: flight.CallInfo, headers: dict[str, list[str]]) -> None:
        values = headers.get("authorization", [])
        if not values or not values[0].lower().startswith("bearer "):
            raise flight.FlightUnauthenticatedError("missing 'authorization: Bearer <token>' header")
        given = values[0][7:].strip().encode()
        if not any(hmac.compare_digest(given, t) for t in self._tokens):
            raise flight.FlightUnauthorizedError("token not accepted")
        return None


class _TableCache:
    """Opened tables by identifier, reused for ``ttl`` seconds (timelines go stale after that)."""

    def __init__(self, ttl: float):
        self.ttl = ttl
        self._items: dict[str, tuple[float, str, HudiTable]] = {}
        self._lock = threading.Lock()

    def get(self, entry: TableEntry) -> HudiTable:
        now = time.monotonic()
        with self._lock:
            hit = self._items.get(entry.identifier)
        if hit and hit[1] == entry.base_uri and now - hit[0] < self.ttl:
            return hit[2]
        table = HudiTable.open(entry.base_uri, storage_options=dict(entry.storage_options) or None)
        with self._lock:
            self._items[entry.identifier] = (now, entry.base_uri, table)
        return table

    def drop(self, identifier: str | None = None) -> None:
        with self._lock:
            if identifier is None:
                self._items.clear()
            else:
                self._items.pop(identifier, None)


class HudiFlightServer(flight.FlightServerBase):
    """Flight front end of the catalog registry (interfaces.md section 2).

    Args:
        config: server settings (address, splits, tickets, warehouses).
        registry: the catalog; built from ``config.resolved_catalog_url`` when omitted.
        signer: ticket signer; built from the configured or persisted secret when omitted.
    """

    def __init__(
        self,
        config: ServerConfig | None = None,
        registry: Registry | None = None,
        signer: TicketSigner | None = None,
        **kwargs: Any,
    ):
        self.config = config or ServerConfig()
        self.config.state_path.mkdir(parents=True, exist_ok=True)
        if self.config.auth_tokens:
            kwargs.setdefault("middleware", {})["auth"] = BearerTokenMiddlewareFactory(self.config.auth_tokens)
        try:
            super().__init__(self.config.location, **kwargs)
        except pa.ArrowException as err:
            raise OSError(f"cannot listen on {self.config.location} (address in use?)") from err
        self.registry = registry or Registry(self.config.resolved_catalog_url)
        if signer is None:
            secret = (
                bytes.fromhex(self.config.secret)
                if self.config.secret
                else load_or_create_secret(self.config.resolved_secret_file)
            )
            signer = TicketSigner(secret, self.config.ticket_ttl_seconds)
        self.signer = signer
        self.split_options = self.config.split_options()
        self.footers = FooterCache()
        self.tables = _TableCache(self.config.table_cache_seconds)
        self.started = time.time()
        self._stop = threading.Event()
        self._location_load = {loc: 0.0 for loc in self.config.locations}
        self._location_lock = threading.Lock()
        if self.config.warehouses:
            self.scan_warehouses()
            if self.config.refresh_interval_seconds > 0:
                threading.Thread(target=self._rescan_loop, name="hudi-warehouse-scan", daemon=True).start()

    # -- warehouses ----------------------------------------------------------------------
    def scan_warehouses(self) -> int:
        """Register the tables of every configured warehouse; returns how many there are."""
        found = 0
        for warehouse in self.config.warehouses:
            found += len(self.registry.discover(warehouse, self.config.storage_options or None))
        self.tables.drop()
        return found

    def _rescan_loop(self) -> None:
        while not self._stop.wait(self.config.refresh_interval_seconds):
            try:
                self.scan_warehouses()
            except Exception:  # a transient storage error must not kill the timer
                log.exception("warehouse re-scan failed")

    def shutdown(self) -> None:
        self._stop.set()
        super().shutdown()

    # -- planning ------------------------------------------------------------------------
    def _open(self, identifier: str) -> tuple[TableEntry, HudiTable]:
        entry = self.registry.load_table(identifier)
        return entry, self.tables.get(entry)

    def _locations(self, weight: float) -> list[str]:
        """Least-loaded data location first, the next one as a retry target."""
        if not self._location_load:
            return []
        with self._location_lock:
            ranked = sorted(self._location_load, key=self._location_load.get)
            self._location_load[ranked[0]] += weight
        return ranked[:2]

    def _endpoint(self, body: TicketBody, expires_at: float, metadata: bytes, weight: float) -> flight.FlightEndpoint:
        ticket = self.signer.sign(body.to_json(), expires_at)
        return flight.FlightEndpoint(
            ticket, self._locations(weight), expiration_time=_timestamp(expires_at), app_metadata=metadata
        )

    def _splits(self, table: HudiTable, scan: Any) -> list[Split]:
        if scan.instant is None:  # a table without commits
            return []
        return list(SplitPlanner(table.storage, self.split_options, self.footers).plan(scan.plan_slices()))

    def plan(self, command: QueryCommand) -> tuple[pa.Schema, list[flight.FlightEndpoint], int, int]:
        """Schema, endpoints, estimated rows and bytes of a query."""
        entry, table = self._open(command.table)
        scan = table.scan(**command.scan_options())
        schema = scan.output_schema()
        if scan.instant is None:  # empty table
            return schema, [], 0, 0
        expires_at = self.signer.expiry()
        wire = _pinned(command, scan)
        splits = self._splits(table, scan)
        rows = sum(s.estimated_rows for s in splits)
        nbytes = sum(s.bytes for s in splits)
        if command.limit is not None:
            # A limit is only defined over the union: one endpoint reads the whole query.
            body = TicketBody(entry.identifier, entry.base_uri, scan.instant, wire)
            meta = query_metadata(splits, command.limit)
            return schema, [self._endpoint(body, expires_at, meta, 1.0)], min(rows, command.limit), nbytes
        endpoints = [
            self._endpoint(
                TicketBody(entry.identifier, entry.base_uri, scan.instant, wire, split_to_json(s)),
                expires_at,
                endpoint_metadata(s),
                s.weight,
            )
            for s in splits
        ]
        return schema, endpoints, rows, nbytes

    # -- Flight RPCs ---------------------------------------------------------------------
    @_flight_errors
    def get_flight_info(self, context: flight.ServerCallContext, descriptor: flight.FlightDescriptor) -> flight.FlightInfo:
        schema, endpoints, rows, nbytes = self.plan(_descriptor_command(descriptor))
        return flight.FlightInfo(schema, descriptor, endpoints, rows, nbytes, ordered=False)

    @_flight_errors
    def get_schema(self, context: flight.ServerCallContext, descriptor: flight.FlightDescriptor) -> flight.SchemaResult:
        command = _descriptor_command(descriptor)
        _, table = self._open(command.table)
        return flight.SchemaResult(table.scan(**command.scan_options()).output_schema())

    @_flight_errors
    def list_flights(self, context: flight.ServerCallContext, criteria: bytes) -> Iterator[flight.FlightInfo]:
        infos = []
        for entry in self.registry.list_tables():
            descriptor = flight.FlightDescriptor.for_path(entry.namespace, entry.name)
            try:
                table = self.tables.get(entry)
                scan = table.scan()
                schema = scan.output_schema()
                splits = self._splits(table, scan)
            except Exception as err:  # one unreadable table must not hide the others
                log.warning("list_flights: skipping %s: %s", entry.identifier, err)
                continue
            rows = sum(s.estimated_rows for s in splits)
            nbytes = sum(s.bytes for s in splits)
            infos.append(flight.FlightInfo(schema, descriptor, [], rows, nbytes))
        return iter(infos)

    @_flight_errors
    def do_get(self, context: flight.ServerCallContext, ticket: flight.Ticket) -> flight.FlightDataStream:
        body = TicketBody.from_json(self.signer.verify(ticket.ticket))
        entry, table = self._open(body.table)
        if entry.base_uri != body.uri:
            raise UnknownTableError(f"table {body.table} was re-registered elsewhere since planning; plan again")
        scan = table.scan(**command_from_json(body.command).scan_options())
        if body.split is None:
            batches = scan.to_batches()
        else:
            file_slice, row_groups = split_from_json(body.split)
            batches = scan.read_slice(file_slice, row_groups=row_groups)
        return flight.GeneratorStream(scan.output_schema(), _stream_errors(self._until_cancelled(context, batches)))

    @staticmethod
    def _until_cancelled(context: flight.ServerCallContext, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            if context.is_cancelled():  # client went away: stop reading storage
                return
            yield batch

    def list_actions(self, context: flight.ServerCallContext) -> list[tuple[str, str]]:
        return [(name, description) for name, (_, description) in ACTIONS.items()]

    @_flight_errors
    def do_action(self, context: flight.ServerCallContext, action: flight.Action) -> list[bytes]:
        body = parse_action(action.type, action.body.to_pybytes() if action.body is not None else b"")
        handler = getattr(self, "_action_" + action.type.replace("-", "_"))
        return [json.dumps(handler(body), default=str).encode()]

    # -- actions -------------------------------------------------------------------------
    def _action_list_namespaces(self, body: dict) -> list[str]:
        return self.registry.list_namespaces()

    def _action_list_tables(self, body: dict) -> list[dict]:
        return [e.to_json() for e in self.registry.list_tables(body.get("namespace"))]

    def _action_register_table(self, body: dict) -> dict:
        table = HudiTable.open(body["uri"], storage_options=body.get("storage_options") or None)
        entry = self.registry.register_table(
            body["table"], body["uri"], body.get("storage_options"), body.get("properties"), body.get("replace", False)
        )
        self.tables.drop(entry.identifier)
        return {**entry.to_json(), "table_type": table.table_type, "table_version": table.table_version}

    def _action_unregister_table(self, body: dict) -> dict:
        self.registry.unregister_table(body["table"])
        self.tables.drop(body["table"])
        return {"table": body["table"], "unregistered": True}

    def _action_refresh_table(self, body: dict) -> dict:
        if "table" not in body:
            return {"tables": self.scan_warehouses()}
        self.tables.drop(body["table"])
        _, table = self._open(body["table"])
        timeline = table.timeline
        return {"table": body["table"], "latest_instant": timeline[-1].requested_time if timeline else None}

    def _action_table_info(self, body: dict) -> dict:
        self.tables.drop(body["table"])  # always the current timeline (streaming readers poll this)
        entry, table = self._open(body["table"])
        return {
            **entry.to_json(),
            "table_type": table.table_type,
            "table_version": table.table_version,
            "record_key_fields": list(table.record_key_fields),
            "partition_fields": list(table.partition_fields),
            "schema": [
                {"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in table.schema
            ],
            "arrow_schema": table.schema.serialize().to_pybytes().hex(),
            "timeline": [
                {"requested_time": i.requested_time, "completion_time": i.completion_time, "action": i.action}
                for i in table.timeline
            ],
        }

    def _action_health(self, body: dict) -> dict:
        return {
            "status": "ok",
            "tables": len(self.registry.list_tables()),
            "uptime_seconds": round(time.time() - self.started, 3),
            "location": self.config.location,
        }


def _serve_data(config: ServerConfig) -> None:
    """Body of an extra data-serving process (``serve --processes N``)."""
    HudiFlightServer(config).serve()


def serve(config: ServerConfig, ready: Callable[[HudiFlightServer], None] | None = None) -> None:
    """Run a server until interrupted.

    With ``processes > 1`` the extra processes listen on the following ports and share the
    catalog and the ticket secret; the endpoints the main server plans name all of them (least
    loaded first, by split weight), so clients spread ``do_get`` over the processes.
    """
    import multiprocessing

    extra: list[ServerConfig] = []
    if config.processes > 1:
        if config.port == 0:
            raise ValueError("--processes needs an explicit --port (the others use the following ports)")
        extra = [
            config.updated({"port": config.port + i, "warehouses": [], "locations": [], "processes": 1})
            for i in range(1, config.processes)
        ]
        config = config.updated({"locations": config.locations or [config.location] + [c.location for c in extra]})
    server = HudiFlightServer(config)  # creates the catalog and the secret before the others start
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_serve_data, args=(c,), daemon=True) for c in extra]
    for proc in workers:
        proc.start()
    if ready is not None:
        ready(server)
    try:
        server.serve()
    finally:
        for proc in workers:
            proc.terminate()


__all__ = ["HudiFlightServer", "serve"]
