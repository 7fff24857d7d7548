"""The query path both front ends share: who the caller is, the tables it opens, the plans, the
tickets and the reads behind them.

One :class:`Queries` lives as long as the server; each RPC works through one :class:`Call`,
which opens a table at most once (one timeline listing, see ``cache.tables``), plans each set of
options once and checks the caller's rights through ``security.access``. Planning pins each
scan (:class:`~.tickets.PinnedScan`) and remembers its read context in a small plan cache keyed
by the pinned scan, so ``do_get`` rebuilds nothing planning already knew; a miss (another
process planned it, or it was evicted) plans again at the pinned instant, from a table state
that holds that instant without a storage request when it is cached.
"""

from __future__ import annotations

import contextlib
import functools
import json
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence, TypeVar, overload

import pyarrow as pa
import pyarrow.flight as flight

from catalog.errors import HudiError, UnknownTableError
from catalog.format.caches import ReadCaches
from catalog.format.log_cache import DecodedLogBlocks
from catalog.format.row_groups import DecodedRowGroups
from catalog.lru import BoundedLRU
from catalog.meta import SEPARATOR, check_narrowing, meta_table, meta_table_named, narrowed, narrowed_schema
from catalog.plan.aggregates import Aggregate
from catalog.plan.options import ReadOptions, resolve
from catalog.plan.planner import ScanPlan, plan
from catalog.plan.splits import FooterCache, SplitOptions
from catalog.read.context import ReadContext
from catalog.read.split_reader import read_splits
from catalog.state import TableState
from catalog.table.files import Split
from flight_server.server.cache.entries import RegistryCache
from flight_server.server.cache.split_cache import SplitResultCache
from flight_server.server.cache.tables import TableCache
from flight_server.server.ops.call_log import note
from flight_server.server.ops.operations import Operations
from flight_server.server.query.placement import Placement
from flight_server.server.query.tickets import (
    AggregateTicket,
    PinnedScan,
    ScanTicket,
    SplitTicket,
    Ticket,
    TicketCodec,
    check_owner,
)
from flight_server.server.query.wire import endpoint_metadata, meta_endpoint_metadata, query_metadata
from flight_server.server.registry import TableEntry
from flight_server.server.security.access import Access
from flight_server.server.security.auth import caller_name
from flight_server.server.security.budgets import CallKeys
from flight_server.server.security.limits import Limits

#: plans remembered for do_get (a plan is a few kilobytes: its schema and read context)
PLAN_CACHE_ENTRIES = 512
#: a point read of at most this many record keys is answered at once (see TicketStream)
POINT_KEYS_AT_ONCE = 16
#: the FlightInfo ``app_metadata`` of aggregates answered from metadata (docs/flight.md, Aggregates)
AGGREGATES_FROM_METADATA = b'{"aggregates": "metadata"}'
A = TypeVar("A", bound=Ticket)
B = TypeVar("B", bound=Ticket)


@dataclass(frozen=True)
class OpenTable:
    """A registered table and its state as one call sees it."""

    entry: TableEntry
    state: TableState

    def paths_hidden(self) -> contextlib.AbstractContextManager[None]:
        """Errors of work on the table name the table, not its storage location."""
        return _table_path_hidden(self.entry.identifier, self.entry.base_uri)


class PlannedScan:
    """One plan: its schema, read context and pinned options now, its splits listed at most once.

    Args:
        table: the table it plans.
        scan: the planner's answer (its splits iterator is consumed by :meth:`splits` only).
        limits: bounds the listing (``planning_seconds``).
        footers: the footer cache planning read through (:meth:`count` reads it again).
    """

    def __init__(self, table: OpenTable, scan: ScanPlan, limits: Limits, footers: FooterCache | None = None):
        self.table = table
        self.schema = scan.schema
        self.context = scan.context
        self.options = scan.options
        self.pinned = PinnedScan(table.entry.identifier, table.entry.base_uri, scan.context.instant, scan.options)
        self._pending: Iterator[Split] | None = scan.splits
        self._splits: tuple[Split, ...] | None = None
        self._limits = limits
        self._footers = footers

    def splits(self) -> tuple[Split, ...]:
        """The splits (listed on first use, within the planning deadline)."""
        if self._splits is None:
            pending, self._pending = self._pending, None
            self._splits = tuple(self._limits.deadline().bounded(pending)) if pending is not None else ()
        return self._splits

    def count(self) -> int | None:
        """The rows the scan returns from footers alone (:meth:`ScanPlan.count` of the listed
        splits, through the footer cache planning used); ``None``: they must be read."""
        return ScanPlan(self.schema, self.context, self.options, iter(self.splits())).count(self._footers)

    def aggregates(self, aggregates: Sequence[Aggregate]) -> pa.RecordBatch:
        """The one row of ``aggregates`` over the scan, from footers alone (:meth:`ScanPlan.aggregates`
        of the listed splits, through the footer cache planning used).

        Raises:
            UnansweredError: the footers do not decide it exactly (the message says why).
        """
        scan = ScanPlan(self.schema, self.context, self.options, iter(self.splits()))
        return scan.aggregates(aggregates, self._footers)


@dataclass(frozen=True)
class _Reading:
    """What ``do_get`` needs of a plan (the plan cache's entries)."""

    schema: pa.Schema
    context: ReadContext
    splits: tuple[Split, ...] | None  # None: not listed (split tickets need none)


@dataclass(frozen=True)
class TicketStream:
    """What ``do_get`` of a split or scan ticket streams.

    Attributes:
        schema: the schema of the batches.
        batches: read as they are asked for.
        few_rows: a point read of at most ``POINT_KEYS_AT_ONCE`` record keys: a few rows, from
            row groups the point-read cache holds, cheaper read at once than streamed.
    """

    schema: pa.Schema
    batches: Iterator[pa.RecordBatch]
    few_rows: bool


@dataclass(frozen=True)
class PlannedQuery:
    """The answer to planning a scan: schema, endpoints, estimates (and the FlightInfo's
    ``app_metadata``, if any)."""

    schema: pa.Schema
    endpoints: list[flight.FlightEndpoint]
    rows: int
    nbytes: int
    app_metadata: bytes = b""

    def flight_info(self, descriptor: flight.FlightDescriptor) -> flight.FlightInfo:
        return flight.FlightInfo(self.schema, descriptor, self.endpoints, self.rows, self.nbytes, ordered=False,
                                 app_metadata=self.app_metadata)


@functools.lru_cache(maxsize=16)  # expiries are whole seconds: one scalar per second of plans
def expiration_time(epoch_seconds: float) -> pa.TimestampScalar:
    """An endpoint's ``expiration_time`` for a ticket expiring at ``epoch_seconds``: in the unit
    ``FlightEndpoint`` keeps (nanoseconds since the epoch), so it is taken without a cast."""
    return pa.scalar(int(epoch_seconds * 1_000_000) * 1000, type=pa.timestamp("ns"))


class Queries:
    """Opening, authorizing, planning and reading, for every front end.

    Args:
        catalog: the registry rows (cached).
        tables: the table states (cached, versioned by instant).
        access: the callers' rights.
        codec: issues and redeems every ticket.
        limits: the bounds of one call.
        split_options: how scans are cut into splits.
        footers: the Parquet footer cache planning reads through.
        placement: where endpoints are read.
        split_results: cached Arrow results of splits.
        ops: planning metrics.
        decoded: decoded row groups of point reads (``None``: none kept).
        logs: block indexes and decoded blocks of the log files point reads merge (``None``:
            none kept).
    """

    def __init__(
        self,
        catalog: RegistryCache,
        tables: TableCache,
        access: Access,
        codec: TicketCodec,
        limits: Limits,
        split_options: SplitOptions,
        footers: FooterCache,
        placement: Placement,
        split_results: SplitResultCache,
        ops: Operations,
        decoded: DecodedRowGroups | None = None,
        logs: DecodedLogBlocks | None = None,
    ):
        self.catalog = catalog
        self.tables = tables
        self.access = access
        self.codec = codec
        self.limits = limits
        self.split_options = split_options
        self.footers = footers
        self.placement = placement
        self.split_results = split_results
        self.ops = ops
        self.caches = ReadCaches(footers, decoded, logs)
        self._plans: BoundedLRU[str, _Reading] = BoundedLRU("plans", PLAN_CACHE_ENTRIES)

    def call(self, context: flight.ServerCallContext, fresh: bool = True) -> "Call":
        """The scope of one RPC (``fresh=False``: cached table states will do, see TableCache.get)."""
        return Call(self, context, fresh)

    # -- who may do what ---------------------------------------------------------------------
    def authorize(self, context: flight.ServerCallContext, right: str, table: str | None = None) -> str:
        """The caller's user name, once it is known to hold ``right`` (``"read"`` or ``"admin"``)
        on ``table`` (``None``: the catalog as a whole); the rules are in ``security.access``.

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

    # -- tables ------------------------------------------------------------------------------
    def open_entry(self, entry: TableEntry, instant: str | None = None, fresh: bool = True) -> OpenTable:
        """The table's state now (or any state holding ``instant``; ``fresh=False``: any cached
        state, see TableCache.get)."""
        with _table_path_hidden(entry.identifier, entry.base_uri):
            return OpenTable(entry, self.tables.get(entry, instant, fresh))

    def forget(self, identifier: str | None = None) -> None:
        """After a catalog change: drop the table's cached state (``None``: all), every cached
        registry row and every cached right."""
        self.tables.drop(identifier)
        self.catalog.forget()
        self.access.forget()

    # -- planning ----------------------------------------------------------------------------
    def plan(self, table: OpenTable, options: ReadOptions) -> PlannedScan:
        with _table_path_hidden(table.entry.identifier, table.entry.base_uri):
            scan = plan(table.state, options, self.split_options, self.footers)
            return PlannedScan(table, scan, self.limits, self.footers)

    def endpoints(self, call: "Call", identifier: str, options: ReadOptions, single: bool = False) -> PlannedQuery:
        """Schema, endpoints, estimated rows and bytes of a scan for the caller ``call.user``
        (authorized by the front end); the tickets name that user, the only one who may read them.
        ``single``: one endpoint reading every split (for a client that reads only the first)."""
        with self.ops.planning():
            planned = call.plan(identifier, options)
            splits = planned.splits()
        table = planned.table
        self.tables.measure(table.entry, table.state)
        call.note(table=table.entry.identifier, instant=planned.context.instant, endpoints=len(splits))
        if planned.context.instant is None:  # a table without commits
            return PlannedQuery(planned.schema, [], 0, 0)
        pinned = planned.pinned
        limit = planned.options.limit
        one = single or limit is not None
        self._plans.put(pinned.key, _Reading(planned.schema, planned.context, splits if one else None), 1)
        expires_at = self.codec.expiry()
        rows = sum(s.estimated_rows for s in splits)
        nbytes = sum(s.bytes for s in splits)
        owner = call.owner
        if one:
            # A limit is only defined over the union: one endpoint reads the whole query.
            ticket = self.codec.issue(ScanTicket(owner, pinned), expires_at)
            endpoint = self._endpoint(ticket, expires_at, query_metadata(list(splits), limit), 1.0, pinned.table)
            return PlannedQuery(planned.schema, [endpoint], rows if limit is None else min(rows, limit), nbytes)
        endpoints = [
            self._endpoint(
                self.codec.issue(SplitTicket(owner, pinned, s), expires_at),
                expires_at,
                endpoint_metadata(s),
                s.weight,
                f"{pinned.table}/{s.file_slice.partition}/{s.file_slice.file_id}",
            )
            for s in splits
        ]
        return PlannedQuery(planned.schema, endpoints, rows, nbytes)

    def aggregate_endpoint(
        self, call: "Call", identifier: str, options: ReadOptions, aggregates: Sequence[Aggregate]
    ) -> PlannedQuery:
        """The one row of ``aggregates`` over the scan of ``options``, answered from metadata now
        (:meth:`PlannedScan.aggregates`) and streamed by one endpoint whose ticket carries it.

        Raises:
            UnansweredError: the metadata does not decide it exactly (UNIMPLEMENTED, naming why).
        """
        with self.ops.planning():
            planned = call.plan(identifier, options)
            answer = planned.aggregates(aggregates)
        table = planned.table
        call.note(table=table.entry.identifier, instant=planned.context.instant, endpoints=1)
        expires_at = self.codec.expiry()
        pinned = planned.pinned
        ticket = self.codec.issue(AggregateTicket(call.owner, answer, pinned), expires_at)
        metadata = meta_endpoint_metadata(1, answer.nbytes)
        endpoint = self._endpoint(ticket, expires_at, metadata, 1.0, pinned.table)
        return PlannedQuery(answer.schema, [endpoint], 1, answer.nbytes, AGGREGATES_FROM_METADATA)

    def _endpoint(
        self, ticket: bytes, expires_at: float, metadata: bytes, weight: float, key: str
    ) -> flight.FlightEndpoint:
        locations = self.placement.locations(weight, key)
        return flight.FlightEndpoint(
            ticket, locations, expiration_time=expiration_time(expires_at), app_metadata=metadata
        )

    # -- metadata tables (catalog.meta) -------------------------------------------------------
    def meta_endpoints(self, call: "Call", table: OpenTable, name: str, options: ReadOptions) -> PlannedQuery:
        """The metadata table ``name`` of ``table`` read with ``options`` (``columns``, ``filters``
        and ``limit``: ``catalog.meta.narrowed``), as one endpoint for the caller (authorized on
        ``table`` by the front end); its rows are counted now and built again when it is read.

        Raises:
            InvalidQueryError: another option, or an unknown column or filter.
        """
        check_narrowing(name, options)
        schema = narrowed_schema(name, options)
        pinned = PinnedScan(table.entry.identifier, table.entry.base_uri, None, options, name)
        rows = narrowed(self.meta_rows(pinned), options)
        call.note(table=table.entry.identifier + SEPARATOR + name, endpoints=1)
        expires_at = self.codec.expiry()
        ticket = self.codec.issue(ScanTicket(call.owner, pinned), expires_at)
        metadata = meta_endpoint_metadata(rows.num_rows, rows.nbytes)
        endpoint = self._endpoint(ticket, expires_at, metadata, 1.0, pinned.table + SEPARATOR + name)
        return PlannedQuery(schema, [endpoint], rows.num_rows, rows.nbytes)

    def pin_meta(self, table: OpenTable, name: str, as_of: str | None) -> PinnedScan:
        """A pinned read of the metadata table ``name`` of ``table`` (as of ``as_of``, resolved
        against its timeline now: an instant before its first commit is refused here).

        Raises:
            InvalidQueryError: an unknown metadata table, or time travel where it means nothing.
        """
        meta_table_named(name, as_of)
        if as_of is not None:
            with _table_path_hidden(table.entry.identifier, table.entry.base_uri):
                as_of = resolve(ReadOptions(as_of=as_of), table.state.timeline).instant
        return PinnedScan(table.entry.identifier, table.entry.base_uri, as_of, ReadOptions(as_of=as_of), name)

    def meta_rows(self, pinned: PinnedScan) -> pa.Table:
        """The rows of a pinned metadata table (``pinned.meta``), from a table state that holds
        its instant.

        Raises:
            UnknownTableError: the table is gone, or was re-registered at another URI since.
        """
        entry = self.catalog.load_table(pinned.table)
        if entry.base_uri != pinned.uri or pinned.meta is None:
            raise UnknownTableError(f"table {pinned.table} was re-registered elsewhere since planning; plan again")
        table = self.open_entry(entry, pinned.instant)
        with _table_path_hidden(entry.identifier, entry.base_uri):
            return meta_table(table.state, pinned.meta, pinned.options.as_of)

    # -- reading -----------------------------------------------------------------------------
    def stream(self, call: "Call", raw: bytes) -> "TicketStream":
        """Schema and batches of a split, scan or aggregate ticket, for its own user only."""
        ticket = self.codec.redeem(raw, (SplitTicket, ScanTicket, AggregateTicket), None)
        call.authorize("read", ticket.scan.table)  # still holds the right (revokes count)
        check_owner(ticket, call.owner)
        call.note(table=ticket.scan.table, instant=ticket.scan.instant)
        if isinstance(ticket, AggregateTicket):
            self.reading(ticket.scan, with_splits=False)  # the table is still registered there
            return TicketStream(ticket.answer.schema, iter([ticket.answer]), True)
        if ticket.scan.meta is not None:
            rows = narrowed(self.meta_rows(ticket.scan), ticket.scan.options)
            return TicketStream(rows.schema, iter(rows.to_batches()), False)
        if isinstance(ticket, SplitTicket):
            reading = self.reading(ticket.scan, with_splits=False)
            point = reading.context.point
            few = point is not None and len(point.keys) <= POINT_KEYS_AT_ONCE
            batches = _paths_hidden(ticket.scan, self.split_results.read(reading.context, ticket.split, self.caches))
            return TicketStream(reading.schema, batches, few)
        scan = self.listed(ticket.scan)
        return TicketStream(scan.schema, self.read(scan, ticket.scan), False)

    def listed(self, pinned: PinnedScan) -> ScanPlan:
        """The plan of a pinned scan with its splits listed (:meth:`reading`), iterable once."""
        reading = self.reading(pinned, with_splits=True)
        return ScanPlan(reading.schema, reading.context, pinned.options, iter(reading.splits or ()))

    def read(self, scan: ScanPlan, pinned: PinnedScan) -> Iterator[pa.RecordBatch]:
        """Every split's rows of ``pinned``'s listed ``scan`` (at most the options' limit), read
        in parallel, each split through the split result cache as a split ticket is."""
        batches = read_splits(scan.context, list(scan.splits), scan.options.limit, read=self.split_results.read,
                              caches=self.caches)
        return _paths_hidden(pinned, batches)

    def reading(self, pinned: PinnedScan, with_splits: bool) -> _Reading:
        """The schema and read context of a pinned scan (and its splits when asked): from the
        plan cache, else planned again at the pinned instant.

        Raises:
            UnknownTableError: the table is gone, or was re-registered at another URI since.
        """
        entry = self.catalog.load_table(pinned.table)
        if entry.base_uri != pinned.uri:
            raise UnknownTableError(f"table {pinned.table} was re-registered elsewhere since planning; plan again")
        key = pinned.key
        hit = self._plans.get(key)
        if hit is not None and (hit.splits is not None or not with_splits):
            return hit
        planned = self.plan(self.open_entry(entry, pinned.instant), pinned.options)
        reading = _Reading(planned.schema, planned.context, planned.splits() if with_splits else None)
        self._plans.put(key, reading, 1)
        return reading


class Call:
    """One RPC's view of the query path: the caller, and each table opened and planned once."""

    def __init__(self, queries: Queries, context: flight.ServerCallContext, fresh: bool = True):
        self.queries = queries
        self.context = context
        self.fresh = fresh
        self._user: str | None = None
        self._tables: dict[str, OpenTable] = {}
        self._plans: dict[tuple[str, str], PlannedScan] = {}

    @property
    def user(self) -> str:
        """The caller's user name, as its last successful check found it (else the credentials')."""
        return self._user if self._user is not None else caller_name(self.context)

    @property
    def owner(self) -> str:
        """The owner of the tickets issued to the caller (``Access.owner``: its account)."""
        return self.queries.access.owner(self.user)

    @property
    def keys(self) -> CallKeys:
        """Who the call's work counts against (its user and connection: fair shares)."""
        return CallKeys.of(self.context, self.user)

    def authorize(self, right: str, table: str | None = None) -> str:
        """See :meth:`Queries.authorize`; the user is noted in the call's log line."""
        self._user = self.queries.authorize(self.context, right, table)
        self.note(user=self._user)
        return self._user

    def readable(self, tables: list[str]) -> list[str]:
        return self.queries.readable(self.context, tables)

    def visible_namespaces(self, namespaces: list[str]) -> list[str]:
        return self.queries.visible_namespaces(self.context, namespaces)

    def entries(self, namespace: str | None = None) -> list[TableEntry]:
        """The registered tables (of ``namespace``)."""
        return self.queries.catalog.list_tables(namespace)

    def open(self, identifier: str) -> OpenTable:
        """The table now; opened once per call."""
        table = self._tables.get(identifier)
        if table is None:
            table = self.open_entry(self.queries.catalog.load_table(identifier))
        return table

    def open_entry(self, entry: TableEntry) -> OpenTable:
        table = self._tables.get(entry.identifier)
        if table is None or table.entry != entry:
            table = self._tables[entry.identifier] = self.queries.open_entry(entry, fresh=self.fresh)
        return table

    def plan(self, identifier: str, options: ReadOptions) -> PlannedScan:
        """The plan of ``options`` on the table; planned once per call."""
        key = (identifier, json.dumps(options.to_json(), sort_keys=True))
        planned = self._plans.get(key)
        if planned is None:
            planned = self._plans[key] = self.queries.plan(self.open(identifier), options)
        return planned

    def endpoints(self, identifier: str, options: ReadOptions, single: bool = False) -> PlannedQuery:
        """See :meth:`Queries.endpoints` (the tickets are issued to this caller)."""
        return self.queries.endpoints(self, identifier, options, single)

    # -- tickets (query.tickets) -----------------------------------------------------------
    def expiry(self) -> float:
        """The expiry of a ticket issued now (``TicketCodec.expiry``)."""
        return self.queries.codec.expiry()

    def issue(self, ticket: Ticket, expires_at: float | None = None) -> bytes:
        """``ticket`` signed (``TicketCodec.issue``)."""
        return self.queries.codec.issue(ticket, expires_at)

    @overload
    def redeem(self, raw: bytes, kinds: tuple[type[A]]) -> A: ...

    @overload
    def redeem(self, raw: bytes, kinds: tuple[type[A], type[B]]) -> A | B: ...

    def redeem(self, raw: bytes, kinds: tuple[type[Ticket], ...]) -> Ticket:
        """The ticket in ``raw`` (``TicketCodec.redeem``); its owner is checked by the caller."""
        return self.queries.codec.redeem(raw, kinds, None)  # type: ignore[arg-type]  # the overloads above

    # -- bounds (security.limits) ----------------------------------------------------------
    def check_body(self, body: bytes, what: str) -> None:
        """Refuse a request part larger than ``max_body_bytes``."""
        self.queries.limits.check_body(body, what)

    @property
    def max_body_bytes(self) -> int:
        return self.queries.limits.max_body_bytes

    # -- reading pinned scans --------------------------------------------------------------
    def pin_meta(self, table: OpenTable, name: str, as_of: str | None) -> PinnedScan:
        """See :meth:`Queries.pin_meta`."""
        return self.queries.pin_meta(table, name, as_of)

    def meta_rows(self, pinned: PinnedScan) -> pa.Table:
        """See :meth:`Queries.meta_rows`."""
        return self.queries.meta_rows(pinned)

    def check_registered(self, pinned: PinnedScan) -> None:
        """Raises ``UnknownTableError`` when the pinned scan's table is gone or registered
        elsewhere since planning (see :meth:`Queries.reading`)."""
        self.queries.reading(pinned, with_splits=False)

    def listed(self, pinned: PinnedScan) -> ScanPlan:
        """See :meth:`Queries.listed`."""
        return self.queries.listed(pinned)

    def read(self, scan: ScanPlan, pinned: PinnedScan) -> Iterator[pa.RecordBatch]:
        """See :meth:`Queries.read`."""
        return self.queries.read(scan, pinned)

    # -- the catalog (actions) -------------------------------------------------------------
    def namespaces(self) -> list[str]:
        """Every namespace of the catalog (cached rows; listings filter them by the caller's rights)."""
        return self.queries.catalog.list_namespaces()

    def allowed(self, right: str, table: str | None = None) -> bool:
        """Whether the caller (as last authorized) holds ``right`` on ``table`` (``None``: the catalog)."""
        return self.queries.access.allowed(self.user, right, table)

    def check_properties(self, properties: Mapping[str, Any]) -> None:
        """Refuse table properties larger than ``max_properties_bytes``."""
        self.queries.limits.check_properties(properties, len(json.dumps(properties)))

    def register_table(
        self, identifier: str, uri: str, storage_options: Mapping[str, Any] | None,
        properties: Mapping[str, str] | None, replace: bool,
    ) -> TableEntry:
        """Register ``uri`` as ``identifier`` (``Registry.register_table``), forgetting what was cached of it."""
        entry = self.queries.catalog.registry.register_table(identifier, uri, storage_options, properties, replace)
        self.queries.forget(entry.identifier)
        return entry

    def unregister_table(self, identifier: str) -> None:
        """Unregister ``identifier``, forgetting what was cached of it."""
        self.queries.catalog.registry.unregister_table(identifier)
        self.queries.forget(identifier)

    def forget(self, identifier: str | None = None) -> None:
        """See :meth:`Queries.forget`."""
        self.queries.forget(identifier)

    def note(self, kind: str | None = None, **fields: object) -> None:
        """Facts for the call's log line, and its kind of work (``ops.call_log``)."""
        note(self.context, kind, **fields)


@contextlib.contextmanager
def _table_path_hidden(table: str, base_uri: str) -> Iterator[None]:
    """Reader errors name files by the table's storage location; a caller sees the table's name
    instead (no server path in any error, docs/flight.md, "Errors")."""
    try:
        yield
    except HudiError as err:
        text = str(err)
        location = base_uri.rstrip("/")
        if location and location in text:
            err.args = (text.replace(location, f"table {table}"),)
        raise


def _paths_hidden(pinned: PinnedScan, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``batches`` of ``pinned``'s table, read when the stream asks: their errors as
    :func:`_table_path_hidden` tells them."""
    with _table_path_hidden(pinned.table, pinned.uri):
        yield from batches


__all__ = ["Call", "OpenTable", "PlannedQuery", "PlannedScan", "Queries", "TicketStream", "expiration_time"]
