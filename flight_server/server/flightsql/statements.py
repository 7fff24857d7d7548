"""SQL statements over Flight SQL: planning (GetFlightInfo), result schemas, and streaming a
statement ticket (DoGet).

Three answers, by the query's shape (:func:`flight_server.server.sql.query.analyze`):

- a plain scan of one table: the JSON path's weighted-split endpoints and ``hf1`` split tickets
  (``HudiFlightServer.plan_query``), so clients fetch the splits in parallel;
- ``SELECT count(*) FROM t`` where the planned slices are Parquet base files without logs: the sum
  of their footer row counts, in a signed count ticket;
- anything else: one endpoint whose signed statement ticket carries the engine SQL and each scan's
  pinned options; DoGet streams every scan's splits into the locked-down DuckDB
  (:mod:`flight_server.server.sql.engine`) and streams its result.

Every table a query touches is authorized when it is planned and again when its ticket is read;
a ticket is only served to the user it was issued to.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import pyarrow as pa
import pyarrow.flight as flight
from sqlglot import exp

from catalog.errors import InvalidQueryError, InvalidTicketError, UnknownTableError
from catalog.plan.options import RANGE_QUERY_TYPES, ReadOptions
from catalog.plan.planner import plan
from catalog.read.split_reader import read_splits
from flight_server.protocol import pack, sql
from flight_server.server.flightsql.handles import COUNT, STATEMENT, sign_statement, verify_statement
from flight_server.server.flightsql.names import Server, resolve_name
from flight_server.server.sql import engine
from flight_server.server.sql.query import Analysis, analyze, hudi_options
from flight_server.server.wire import QueryCommand


@dataclass
class _Resolution:
    """Collects, while a query is analysed, the caller's user name and the tables it touches."""

    server: Server
    context: flight.ServerCallContext
    user: str | None = None
    tables: list[str] = field(default_factory=list)

    def __call__(self, table: exp.Table) -> tuple[str, pa.Schema, ReadOptions]:
        ref = resolve_name(self.server, table.catalog or None, table.db or None, table.name)
        self.user = self.server.authorize(self.context, "read", ref.identifier)
        self.tables.append(ref.identifier)
        options = _combine(ref.options, hudi_options(table), table.name)
        _, state = self.server.open_table(ref.identifier)
        return ref.identifier, plan(state, options).schema, options

    def caller(self) -> str:
        """The user name (a query without tables still needs the right to read)."""
        return self.user if self.user is not None else self.server.authorize(self.context, "read")


def _combine(name_options: ReadOptions, clause_options: ReadOptions, name: str) -> ReadOptions:
    """``t_ro`` (read-optimized) with the reference's time travel or incremental clause."""
    if not name_options.read_optimized:
        return clause_options
    if clause_options.query_type in RANGE_QUERY_TYPES:
        raise InvalidQueryError(f"{name} is read-optimized: {clause_options.query_type} queries read the table itself")
    return name_options.replace(as_of=clause_options.as_of)


class Statements:
    """SQL statements of one server."""

    def __init__(self, server: Server, settings: engine.EngineSettings):
        self.server = server
        self.settings = settings

    # -- planning ------------------------------------------------------------------------
    def analyze(
        self,
        context: flight.ServerCallContext,
        text: str,
        parameters: Sequence[Any] | None,
        user: str | None = None,
    ) -> tuple[Analysis, str]:
        """The analysis of ``text`` and the caller's user name (every table authorized).

        Raises:
            InvalidTicketError: ``user`` (a prepared statement's) is not the caller.
        """
        self.server.limits.check_body(text.encode(), "SQL")
        resolution = _Resolution(self.server, context)
        analysis = analyze(text, resolution, parameters)
        caller = resolution.caller()
        if user is not None and caller != user:
            raise InvalidTicketError("prepared statement was created by another user")
        return analysis, caller

    def schema(self, analysis: Analysis) -> pa.Schema:
        """The result schema, without planning any split."""
        if analysis.count_star is not None:
            return _count_schema(analysis.count_star)
        if analysis.scan is not None:
            _, state = self.server.open_table(analysis.scan.table)
            return plan(state, analysis.scan.options).schema
        views = {}
        for spec in analysis.plan.scans:
            _, state = self.server.open_table(spec.table)
            views[spec.view] = plan(state, spec.options).schema
        return engine.result_schema(analysis.plan.sql, views, self.settings)

    def flight_info(
        self,
        context: flight.ServerCallContext,
        descriptor: flight.FlightDescriptor,
        text: str,
        parameters: Sequence[Any] | None,
        user: str | None = None,
    ) -> flight.FlightInfo:
        analysis, user = self.analyze(context, text, parameters, user)
        if analysis.scan is not None:
            command = QueryCommand(analysis.scan.table, analysis.scan.options)
            schema, endpoints, rows, nbytes = self.server.plan_query(command, user)
            return flight.FlightInfo(schema, descriptor, endpoints, rows, nbytes, ordered=False)
        expires_at = self.server.signer.expiry()
        if analysis.count_star is not None:
            counted = self._metadata_count(analysis)
            if counted is not None:
                table, uri, pinned, count = counted
                doc = {"k": COUNT, "n": analysis.count_star, "c": count, "s": [[None, table, uri, pinned]], "u": user}
                return self._single_endpoint(descriptor, _count_schema(analysis.count_star), doc, expires_at, 1)
        scans, views = [], {}
        for spec in analysis.plan.scans:
            entry, state = self.server.open_table(spec.table)
            scan = self.server._plan(state, spec.options)
            scans.append([spec.view, spec.table, entry.base_uri, scan.options.to_json()])
            views[spec.view] = scan.schema
        schema = engine.result_schema(analysis.plan.sql, views, self.settings)
        doc = {"k": STATEMENT, "q": analysis.plan.sql, "s": scans, "u": user}
        return self._single_endpoint(descriptor, schema, doc, expires_at, -1)

    def _single_endpoint(
        self, descriptor: flight.FlightDescriptor, schema: pa.Schema, doc: dict[str, Any], expires_at: float, rows: int
    ) -> flight.FlightInfo:
        handle = sign_statement(self.server.signer, doc, expires_at)
        ticket = pack(sql.TicketStatementQuery(statement_handle=handle))
        expiration = pa.scalar(int(expires_at * 1_000_000), type=pa.timestamp("us", tz="UTC"))
        endpoint = flight.FlightEndpoint(ticket, [], expiration_time=expiration)
        return flight.FlightInfo(schema, descriptor, [endpoint], rows, -1, ordered=True)

    def _metadata_count(self, analysis: Analysis) -> tuple[str, str, dict[str, Any], int] | None:
        """``(table, base URI, pinned options, rows)`` when every planned slice is a Parquet base file without
        logs and no filter applies (a COW snapshot, a read-optimized read): the footer row counts
        are then exactly the rows the read returns. ``None``: count by reading."""
        spec = analysis.plan.scans[0]
        options = spec.options.replace(columns=None, limit=None)
        if options.incremental or options.cdc or options.filters:
            return None
        entry, state = self.server.open_table(spec.table)
        scan = self.server._plan(state, options)
        total = 0
        for split in self.server.limits.deadline().bounded(scan.splits):
            base = split.file_slice.base_file
            if base is None or base.extension != "parquet" or split.file_slice.log_files:
                return None
            total += split.estimated_rows
        return spec.table, entry.base_uri, scan.options.to_json(), total

    # -- reading -------------------------------------------------------------------------
    def stream(
        self, context: flight.ServerCallContext, handle: bytes
    ) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
        """Verify a statement ticket (signature, expiry, user, every table's right) and run it."""
        doc = verify_statement(handle, self.server.signer, self.server.limits)
        try:
            scans = [list(s) for s in doc["s"]]
            user = doc["u"]
        except (KeyError, TypeError) as err:
            raise InvalidTicketError("statement ticket payload is incomplete") from err
        for scan in scans:
            if self.server.authorize(context, "read", str(scan[1])) != user:
                raise InvalidTicketError("statement ticket was issued to another user")
        if not scans and self.server.authorize(context, "read") != user:
            raise InvalidTicketError("statement ticket was issued to another user")
        if doc["k"] == COUNT:
            self._check_uri(scans[0][1], scans[0][2])
            schema = _count_schema(str(doc["n"]))
            return schema, iter([pa.record_batch([pa.array([int(doc["c"])], pa.int64())], schema=schema)])
        readers = {}
        failures: list[Exception] = []
        for view, table, uri, options in scans:
            _, state = self._check_uri(table, uri)
            planned = self.server._plan(state, ReadOptions.from_json(options))
            batches = _recording(read_splits(planned.context, planned.splits, planned.options.limit), failures)
            readers[str(view)] = pa.RecordBatchReader.from_batches(planned.schema, batches)
        try:
            schema, results = engine.run(str(doc["q"]), readers, self.settings)
        except InvalidQueryError as err:
            raise (failures[0] if failures else err) from err
        return schema, _source_errors_first(results, failures)

    def _check_uri(self, table: str, uri: str) -> Any:
        entry, state = self.server.open_table(table)
        if entry.base_uri != uri:
            raise UnknownTableError(f"table {table} was re-registered elsewhere since planning; plan again")
        return entry, state


def _recording(batches: Iterator[pa.RecordBatch], failures: list[Exception]) -> Iterator[pa.RecordBatch]:
    """``batches``, remembering an error of reading the table (the engine only sees its text)."""
    try:
        yield from batches
    except Exception as err:
        failures.append(err)
        raise


def _source_errors_first(results: Iterator[pa.RecordBatch], failures: list[Exception]) -> Iterator[pa.RecordBatch]:
    """The engine's batches; when the engine fails because reading a table failed, that error
    (mapped like any read error: a missing file is NOT_FOUND, ...) instead of the engine's text."""
    try:
        yield from results
    except InvalidQueryError as err:
        if failures:
            raise failures[0] from err
        raise


def _count_schema(name: str) -> pa.Schema:
    return pa.schema([pa.field(name, pa.int64())])


__all__ = ["Statements"]
