"""SQL statements over Flight SQL: planning (GetFlightInfo), result schemas, and streaming a
statement ticket (DoGet).

Three answers, by the query's shape (:func:`flight_server.server.sql.query.analyze`):

- a plain scan of one table: the JSON path's weighted-split endpoints and split tickets
  (``Queries.endpoints``), so clients fetch the splits in parallel;
- ``SELECT count(*) FROM t`` where the planned slices are Parquet base files without logs: the sum
  of their footer row counts, in a signed count ticket (with a WHERE the scan carries whole: when
  column statistics prove every row of every planned row group matches: ``ScanPlan.count``);
- anything else: one endpoint whose signed statement ticket carries the engine SQL and each scan's
  pinned options; DoGet runs it in an engine process (:mod:`flight_server.server.engine.sandbox`)
  over its views, built once by the query path (:mod:`flight_server.server.query.engine_views`:
  every scan's splits through the split result cache, or an Arrow dataset of the plain Parquet
  base files the engine scans itself), and streams its result.

A call whose client has not shown that it reads every endpoint (:mod:`.single_endpoint`) gets a
plain scan in one endpoint: one scan ticket reading every split, in the same types (a table without
commits: the engine's empty answer). Catalog statements (``SHOW TABLES``, ``DESCRIBE``:
:mod:`flight_server.server.sql.show`) get one endpoint whose statement ticket carries the statement
and no view; it is answered from the catalog when read. Every result schema carries the Flight SQL
column metadata (:mod:`.column_metadata`).

Every table a query touches is authorized when it is planned and again when its ticket is read;
a ticket is only served to the user it was issued to (tickets: ``query.tickets``).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import pyarrow as pa
import pyarrow.flight as flight
from sqlglot import exp

from catalog.errors import InvalidQueryError
from catalog.plan.dataset import Fragments
from catalog.plan.options import RANGE_QUERY_TYPES, ReadOptions
from flight_server.protocol import pack, sql
from flight_server.server.engine.sandbox import SandboxedEngine
from flight_server.server.flightsql import show
from flight_server.server.flightsql.column_metadata import Origin, describe
from flight_server.server.flightsql.flight_infos import FlightInfos
from flight_server.server.flightsql.names import CATALOG, Reference, meta_reference, readable_name, resolve_name
from flight_server.server.flightsql.table_facts import TableFacts
from flight_server.server.query.engine_views import ScanRoutes, StatementViews
from flight_server.server.query.queries import Call, PlannedScan, expiration_time
from flight_server.server.query.tickets import CountTicket, PinnedScan, StatementTicket, Ticket, check_owner
from flight_server.server.sql.analyses import Analyses
from flight_server.server.sql.hints import with_column_hint
from flight_server.server.sql.parameters import parameter_types
from flight_server.server.sql.query import Analysis, hudi_options
from flight_server.server.sql.show import CatalogStatement, catalog_statement


@dataclass
class _Resolution:
    """Collects, while a query is analysed, the caller's user name and the tables it touches."""

    call: Call
    facts: TableFacts
    user: str | None = None
    tables: list[str] = field(default_factory=list)

    def __call__(self, table: exp.Table) -> tuple[str, pa.Schema, ReadOptions]:
        ref = self._authorized(table.catalog or None, table.db or None, table.name)
        self.tables.append(ref.identifier)
        options = _reference_options(ref, table)
        return ref.name, self.facts.schema(self.call, ref.name, options), options

    def _authorized(self, catalog: str | None, namespace: str | None, name: str) -> Reference:
        """The table a name resolves to, once the caller may read it (``names.readable_name``)."""
        ref = readable_name(self.call, catalog, namespace, name)
        self.user = self.call.user
        return ref

    def caller(self) -> str:
        """The user name (a query without tables still needs the right to read)."""
        return self.user if self.user is not None else self.call.authorize("read")


def _reference_options(ref: Reference, table: exp.Table) -> ReadOptions:
    """The options a resolved reference reads with: its name's and its clauses'. A metadata
    table takes time travel only (``hudi_table_changes`` reads rows, not metadata)."""
    clause = hudi_options(table)
    if ref.meta is None:
        return _combine(ref.options, clause, table.name)
    if clause.query_type in RANGE_QUERY_TYPES:
        raise InvalidQueryError(f"{clause.query_type} queries read a table's rows, not its metadata table {ref.meta}")
    return ReadOptions(as_of=clause.as_of)


def _combine(name_options: ReadOptions, clause_options: ReadOptions, name: str) -> ReadOptions:
    """``t_ro`` (read-optimized) with the reference's time travel or incremental clause."""
    if not name_options.read_optimized:
        return clause_options
    if clause_options.query_type in RANGE_QUERY_TYPES:
        raise InvalidQueryError(f"{name} is read-optimized: {clause_options.query_type} queries read the table itself")
    return name_options.replace(as_of=clause_options.as_of)


class Statements:
    """SQL statements: analysed, planned and read through the calls of the query path.

    Args:
        engine: runs the engine SQL (and keeps the result schemas it told).
        analyses: the statements' templates and analyses kept.
        fragments: the base files' fragments native scans keep (``ScanPlan.to_dataset``).
        facts: the scans' schemas, pins and metadata counts kept per table state.
        infos: the FlightInfos' result schemas in their wire form.

    The caches are built, sized and reported by the composition root (``app.sql_statements``).
    """

    def __init__(
        self, engine: SandboxedEngine, analyses: Analyses, fragments: Fragments, facts: TableFacts, infos: FlightInfos
    ):
        self.engine = engine
        self.analyses = analyses
        self.fragments = fragments
        self.routes = ScanRoutes()
        self.facts = facts
        self.infos = infos

    # -- planning ------------------------------------------------------------------------
    def analyze(self, call: Call, text: str, parameters: Sequence[Any] | None, owner: Ticket | None = None) -> Analysis:
        """The analysis of ``text``, every table authorized for the caller.

        Raises:
            flight.FlightUnauthorizedError: ``owner`` (a prepared statement) was issued to another user.
        """
        call.check_body(text.encode(), "SQL")
        resolution = _Resolution(call, self.facts)
        analysis = self.analyses.analyze(text, resolution, parameters)
        resolution.caller()  # the caller may read (also a query without tables)
        if owner is not None:
            check_owner(owner, call.owner)
        if any(meta_reference(call, spec.table) is not None for spec in analysis.plan.scans):
            # a metadata table has no splits and no footers: the engine answers over its rows
            analysis = dataclasses.replace(analysis, scan=None, count_star=None)
        return analysis

    def result_schema(
        self, call: Call, text: str, parameters: Sequence[Any] | None, owner: Ticket | None = None
    ) -> pa.Schema:
        """The result schema of ``text``: a query (analysed: refusals and rights apply) or a catalog statement."""
        statement = self._catalog_statement(call, text, owner)
        if statement is not None:
            return show.result_schema(statement)
        return self.schema(call, self.analyze(call, text, parameters, owner))

    def placeholder_count(self, text: str) -> int:
        """How many ``?`` parameters ``text`` takes (its tokens are kept for its analysis)."""
        return len(self.analyses.template(text).marks)

    def parameter_schema(self, call: Call, text: str) -> pa.Schema:
        """The types of the ``?`` parameters of ``text`` (analysed before: its tables are authorized)."""
        if self.analyses.catalog_statement(text) is not None:
            return pa.schema([])

        def schema_of(table: exp.Table) -> pa.Schema:
            ref = resolve_name(call, table.catalog or None, table.db or None, table.name)
            return self.facts.schema(call, ref.name, _reference_options(ref, table))

        return parameter_types(self.analyses.parameter_places(text), schema_of)

    def _catalog_statement(self, call: Call, text: str, owner: Ticket | None) -> CatalogStatement | None:
        """The catalog statement ``text`` is (the caller may read), ``None`` for anything else."""
        call.check_body(text.encode(), "SQL")
        statement = self.analyses.catalog_statement(text)
        if statement is not None:
            call.authorize("read")
            if owner is not None:
                check_owner(owner, call.owner)
        return statement

    def schema(self, call: Call, analysis: Analysis) -> pa.Schema:
        """The result schema (with its Flight SQL column metadata), without listing any split."""
        if analysis.count_star is not None:
            return _count_schema(analysis.count_star)
        if analysis.scan is not None:
            schema = self.facts.schema(call, analysis.scan.table, analysis.scan.options)
            return _described(schema, ((analysis.scan.table, schema),))
        views = {spec.view: self.facts.schema(call, spec.table, spec.options) for spec in analysis.plan.scans}
        return self._engine_schema(call, analysis, views)

    def flight_info(
        self,
        call: Call,
        descriptor: flight.FlightDescriptor,
        text: str,
        parameters: Sequence[Any] | None,
        owner: Ticket | None = None,
        single_endpoint: bool = False,
    ) -> flight.FlightInfo:
        """The statement's FlightInfo: the weighted-split endpoints of a plain scan, else one
        endpoint (always one when ``single_endpoint``: for clients that read only the first)."""
        expires_at = call.expiry()
        statement = self._catalog_statement(call, text, owner)
        if statement is not None:
            show.result(call, statement)  # an unknown table fails now, not when read
            ticket = call.issue(StatementTicket(call.owner, text, ()), expires_at)
            return self._single_endpoint(descriptor, show.result_schema(statement), ticket, expires_at, -1)
        analysis = self.analyze(call, text, parameters, owner)
        if analysis.scan is not None:
            planned = call.endpoints(analysis.scan.table, analysis.scan.options, single_endpoint)
            if planned.endpoints or not single_endpoint:
                schema = _described(planned.schema, ((analysis.scan.table, planned.schema),))
                endpoints = planned.endpoints
                return self.infos.info(schema, descriptor, endpoints, planned.rows, planned.nbytes, ordered=False)
        if analysis.count_star is not None:
            counted = self._metadata_count(call, analysis)
            if counted is not None:
                pinned, count = counted
                ticket = call.issue(CountTicket(call.owner, analysis.count_star, count, pinned), expires_at)
                return self._single_endpoint(descriptor, _count_schema(analysis.count_star), ticket, expires_at, 1)
        views, schemas = [], {}
        for spec in analysis.plan.scans:
            planned_scan = self.facts.scan(call, spec.table, spec.options)
            views.append((spec.view, planned_scan.pinned))
            schemas[spec.view] = planned_scan.schema
        schema = self._engine_schema(call, analysis, schemas)
        ticket = call.issue(StatementTicket(call.owner, analysis.plan.sql, tuple(views)), expires_at)
        return self._single_endpoint(descriptor, schema, ticket, expires_at, -1)

    def _engine_schema(self, call: Call, analysis: Analysis, views: dict[str, pa.Schema]) -> pa.Schema:
        """The described result schema of a statement the engine runs over ``views`` (view name ->
        schema); a column it does not find is told with the columns of the tables it reads."""
        sources = tuple((spec.table, views[spec.view]) for spec in analysis.plan.scans)
        try:
            schema = self.engine.result_schema(analysis.plan.sql, views, call.context.is_cancelled, call.keys)
        except InvalidQueryError as err:
            tables = [(spec.table, self.facts.schema(call, spec.table, spec.options.replace(columns=None)))
                      for spec in analysis.plan.scans]  # the views hold the columns the query names only
            hinted = with_column_hint(err, tables)
            if hinted is err:
                raise
            raise hinted from None
        return _described(schema, sources)

    def _single_endpoint(
        self, descriptor: flight.FlightDescriptor, schema: pa.Schema, handle: bytes, expires_at: float, rows: int
    ) -> flight.FlightInfo:
        ticket = pack(sql.TicketStatementQuery(statement_handle=handle))
        endpoint = flight.FlightEndpoint(ticket, [], expiration_time=expiration_time(expires_at))
        return self.infos.info(schema, descriptor, [endpoint], rows, -1, ordered=True)

    def _metadata_count(self, call: Call, analysis: Analysis) -> tuple[PinnedScan, int] | None:
        """The pinned scan and its rows when every planned slice is a Parquet base file without
        logs (a COW snapshot, a read-optimized read): without a filter the footer row counts are
        exactly the rows the read returns; with filters, when column statistics prove that every
        row of every planned row group matches (``ScanPlan.count``). ``None``: count by reading."""
        spec = analysis.plan.scans[0]
        options = spec.options.replace(columns=None, limit=None)
        if options.incremental or options.cdc:
            return None
        return self.facts.count(call, spec.table, options, PlannedScan.count)

    # -- reading -------------------------------------------------------------------------
    def stream(self, call: Call, handle: bytes) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
        """Redeem a statement or count ticket (signature, expiry, every table's right, its user) and run it."""
        ticket = call.redeem(handle, (StatementTicket, CountTicket))
        scans = [ticket.scan] if isinstance(ticket, CountTicket) else [scan for _, scan in ticket.views]
        for scan in scans:
            call.authorize("read", scan.table)
        if not scans:
            call.authorize("read")
        check_owner(ticket, call.owner)
        if scans:  # the call log and the live queries name what the statement reads
            call.note(table=", ".join(sorted({scan.table for scan in scans})))
        if isinstance(ticket, CountTicket):
            call.check_registered(ticket.scan)
            schema = _count_schema(ticket.column)
            return schema, iter([pa.record_batch([pa.array([ticket.count], pa.int64())], schema=schema)])
        statement = catalog_statement(ticket.sql) if not ticket.views else None
        if statement is not None:  # engine SQL is always a query: only a catalog statement parses as one
            table = show.result(call, statement)
            return table.schema, iter(table.to_batches())
        fragments = self.fragments if self.engine.settings.native_scan else None
        views = StatementViews(call, ticket.views, fragments, self.routes)
        schema, results = self.engine.run(ticket.sql, views.build, call.context.is_cancelled, call.keys)
        described = _described(schema, views.sources)
        return described, _with_schema(views.relayed(results), described)


def _described(schema: pa.Schema, sources: tuple[tuple[str, pa.Schema], ...]) -> pa.Schema:
    """``schema`` with its Flight SQL column metadata; with one source table, a column of that
    table's name and type is said to come from it (a column's name and type: the sources'
    metadata plays no part)."""
    return _describing(_Exactly(schema), tuple((table, _Exactly(source)) for table, source in sources))


@dataclass(frozen=True, eq=False)
class _Exactly:
    """A schema equal only to one with the same metadata too (``==`` of schemas ignores it)."""

    schema: pa.Schema

    def __hash__(self) -> int:
        return hash(tuple(self.schema.names))  # cheaper than a schema's own hash (its text)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Exactly) and self.schema.equals(other.schema, check_metadata=True)


@functools.lru_cache(maxsize=256)  # a statement executed again asks for the very same description
def _describing(exactly: _Exactly, sources: tuple[tuple[str, _Exactly], ...]) -> pa.Schema:
    schema = exactly.schema
    origins = {}
    if len(sources) == 1:
        table, source = sources[0][0], sources[0][1].schema
        namespace, _, name = table.partition(".")
        for f in schema:
            index = source.get_field_index(f.name)
            if index >= 0 and source.field(index).type == f.type:
                origins[f.name] = Origin(CATALOG, namespace, name)
    return describe(schema, origins)


def _with_schema(batches: Iterator[pa.RecordBatch], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The batches, carrying ``schema``'s field metadata (zero-copy)."""
    for batch in batches:
        yield pa.RecordBatch.from_arrays(batch.columns, schema=schema)


@functools.lru_cache(maxsize=64)  # a count's column name: a few per client
def _count_schema(name: str) -> pa.Schema:
    """The described schema of a count's one ``int64`` column."""
    return describe(pa.schema([pa.field(name, pa.int64())]))


__all__ = ["Statements"]
