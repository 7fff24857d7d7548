"""What each console page shows, for one user: built from the query path (the same registry rows,
table states, plans and rights as Flight) and the catalog's metadata tables; no HTTP here.

Every page answers only what its user may read: namespaces where the user holds a grant, tables
it may read, and a table it may not read answers exactly as a missing one
(:class:`NoSuchTable`). Live queries: an admin sees every call, anyone else their own.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime

import pyarrow as pa

from catalog.errors import UnknownTableError
from catalog.meta.health import Check, health_checks, instant_moment
from catalog.meta.layout import group_facts, partitions_table
from catalog.plan.options import ReadOptions
from catalog.state import TableState
from catalog.timeline.instants import Instant
from flight_server.server.console.charts import BarChart, Event, HBarChart, TimeChart, bar_chart, histogram, time_chart
from flight_server.server.ops.live import LiveCall, LiveCalls
from flight_server.server.query.queries import OpenTable, Queries
from flight_server.server.registry import TableEntry, parse_identifier
from flight_server.server.security.limits import Deadline

#: the latest instants a timeline page draws and lists (older ones: the $timeline table)
MAX_INSTANTS = 500
#: partitions drawn in the partition chart (the largest), and listed in its table
MAX_PARTITIONS_DRAWN = 40
MAX_PARTITIONS_LISTED = 1000
#: lanes of the timeline chart, top to bottom
LANES = ("commit", "deltacommit", "compaction", "log compaction", "clustering", "replace", "clean", "rollback",
         "restore", "savepoint", "indexing", "other")
_LANE_OF = {"commit": "commit", "deltacommit": "deltacommit", "compaction": "compaction",
            "logcompaction": "log compaction", "clustering": "clustering", "clean": "clean", "rollback": "rollback",
            "restore": "restore", "savepoint": "savepoint", "indexing": "indexing"}


class NoSuchTable(LookupError):
    """A table that does not exist, or that the user may not read: one answer for both."""

    def __init__(self, identifier: str):
        super().__init__(f"no table {identifier[:200]!r} here, or none you may read")


@dataclass(frozen=True)
class NamespaceRow:
    name: str
    tables: int  # those the user may read


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    nullable: bool


@dataclass(frozen=True)
class Overview:
    """A table's page: what it is, its schema and its size."""

    entry: TableEntry
    table_type: str
    table_version: int
    record_key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...]
    columns: tuple[Column, ...]
    rows: int | None  # exact, from Parquet footers; None: log files must be merged to count them
    base_rows: int | None  # rows of the latest base files (footers), when ``rows`` is unknown
    log_files: int  # behind the latest base files (merge-on-read)
    log_bytes: int
    file_groups: int
    partitions: int
    bytes: int
    instants: int
    latest_instant: str | None


@dataclass(frozen=True)
class InstantRow:
    """One instant of the active timeline, as listed under the chart."""

    requested: str
    completed: str | None
    action: str
    lane: str
    state: str
    operation: str | None
    requested_at: datetime | None
    completed_at: datetime | None

    @property
    def seconds(self) -> float | None:
        if self.requested_at is None or self.completed_at is None:
            return None
        return max(0.0, (self.completed_at - self.requested_at).total_seconds())


@dataclass(frozen=True)
class TimelinePage:
    rows: tuple[InstantRow, ...]  # newest first
    chart: TimeChart
    total: int  # instants on the active timeline
    lanes: tuple[tuple[str, int], ...]  # lane -> instants drawn in it


@dataclass(frozen=True)
class PartitionRow:
    partition: str
    file_groups: int
    base_files: int
    log_files: int
    bytes: int
    last_commit: str | None


@dataclass(frozen=True)
class FilesPage:
    file_groups: int
    bytes: int
    smallest: int | None
    largest: int | None
    group_sizes: BarChart
    partition_sizes: HBarChart
    partitions: tuple[PartitionRow, ...]  # largest first, at most MAX_PARTITIONS_LISTED
    partition_count: int


@dataclass(frozen=True)
class HealthPage:
    checks: tuple[Check, ...]

    @property
    def counts(self) -> dict[str, int]:
        found = Counter(c.status for c in self.checks)
        return {status: found[status] for status in ("WARN", "INFO", "OK") if found[status]}


class Pages:
    """The console's pages, answered for a user through the server's query path."""

    def __init__(self, queries: Queries, live: LiveCalls | None):
        self.queries = queries
        self.live = live

    # -- the catalog -------------------------------------------------------------------------
    def namespaces(self, user: str) -> list[NamespaceRow]:
        """The namespaces the user holds a grant in, with the tables it may read in each."""
        catalog, access = self.queries.catalog, self.queries.access
        readable = set(access.readable(user, [e.identifier for e in catalog.list_tables()]))
        counts = Counter(identifier.split(".", 1)[0] for identifier in readable)
        visible = access.visible_namespaces(user, catalog.list_namespaces())
        return [NamespaceRow(ns, counts[ns]) for ns in sorted(set(visible) | set(counts))]

    def tables(self, user: str, namespace: str) -> list[TableEntry]:
        """The tables of ``namespace`` the user may read (empty: none, or no such namespace)."""
        entries = self.queries.catalog.list_tables(namespace)
        readable = set(self.queries.access.readable(user, [e.identifier for e in entries]))
        return sorted((e for e in entries if e.identifier in readable), key=lambda e: e.name)

    def open(self, user: str, identifier: str) -> OpenTable:
        """The table now (one timeline listing when cached), once the user may read it.

        Raises:
            NoSuchTable: no such table, or the user may not read it (checked first, so the two
                cannot be told apart).
        """
        try:
            parse_identifier(identifier)
        except ValueError:
            raise NoSuchTable(identifier) from None
        if not self.queries.access.allowed(user, "read", identifier):
            raise NoSuchTable(identifier)
        try:
            entry = self.queries.catalog.load_table(identifier)
        except UnknownTableError:
            raise NoSuchTable(identifier) from None
        return self.queries.open_entry(entry)

    # -- a table -----------------------------------------------------------------------------
    def overview(self, table: OpenTable, deadline: Deadline) -> Overview:
        """A table's facts. Rows are counted from Parquet footers, never estimated: where log
        files must be merged to know them, the base files' rows are told with the log files."""
        state = table.state
        planned = self.queries.plan(table, ReadOptions())
        rows = planned.count()
        base_rows = self.queries.plan(table, ReadOptions(query_type="read_optimized")).count() \
            if rows is None and state.config.is_mor else None
        facts = list(deadline.bounded(group_facts(state.fs_view, None)))
        logs = [log for f in facts for log in f.file_slice.log_files]
        config = state.config
        latest = state.timeline[-1].requested_time if len(state.timeline) else None
        return Overview(
            table.entry, config.table_type, config.table_version, tuple(config.record_key_fields),
            tuple(config.partition_fields), tuple(_columns(planned.schema)), rows, base_rows, len(logs),
            sum(log.size for log in logs), len(facts), len({f.file_slice.partition for f in facts}),
            sum(f.file_slice.total_size for f in facts), len(state.timeline.completed) + len(state.timeline.pending),
            latest,
        )

    def timeline(self, table: OpenTable, deadline: Deadline) -> TimelinePage:
        state = table.state
        timeline = state.timeline
        instants = sorted(timeline.completed + timeline.pending, key=lambda i: (i.requested_time, i.action))
        shown = instants[-MAX_INSTANTS:]
        rows = [_instant_row(state, i) for i in deadline.bounded(iter(shown))]  # reads each write's metadata
        events = [Event(r.lane, r.requested_at, _span_end(r), _title(r), r.state != "COMPLETED")
                  for r in rows if r.requested_at is not None]
        lanes = Counter(r.lane for r in rows)
        return TimelinePage(tuple(reversed(rows)), time_chart(events, LANES), len(instants),
                            tuple((lane, lanes[lane]) for lane in LANES if lanes[lane]))

    def files(self, table: OpenTable, deadline: Deadline) -> FilesPage:
        view = table.state.fs_view
        sizes = [f.file_slice.total_size for f in deadline.bounded(group_facts(view, None))]
        deadline.check()
        rows = [PartitionRow(r["partition"], r["file_groups"], r["base_files"], r["log_files"], r["bytes"],
                             r["last_commit"]) for r in partitions_table(view).to_pylist()]
        rows.sort(key=lambda r: (-r.bytes, r.partition))
        return FilesPage(
            len(sizes), sum(sizes), min(sizes, default=None), max(sizes, default=None),
            histogram(sizes, "file groups"),
            bar_chart([(r.partition or "(root)", r.bytes) for r in rows], "partitions", MAX_PARTITIONS_DRAWN),
            tuple(rows[:MAX_PARTITIONS_LISTED]), len(rows),
        )

    def health(self, table: OpenTable, deadline: Deadline) -> HealthPage:
        checks = HealthPage(tuple(health_checks(table.state)))  # storage listings bounded in number
        deadline.check()
        return checks

    # -- the server --------------------------------------------------------------------------
    def live_calls(self, user: str) -> list[LiveCall]:
        """The calls in flight: every one for an admin, the user's own otherwise."""
        if self.live is None:
            return []
        calls = self.live.everywhere()
        if self.queries.access.allowed(user, "admin"):
            return calls
        return [c for c in calls if c.user == user]

    def is_admin(self, user: str) -> bool:
        return self.queries.access.allowed(user, "admin")


def _columns(schema: pa.Schema) -> list[Column]:
    return [Column(f.name, str(f.type), f.nullable) for f in schema]


def _lane(state: TableState, instant: Instant, operation: str | None) -> str:
    """The chart lane of an instant: a merge-on-read table's ``commit`` is a compaction, a
    ``replacecommit`` is a clustering when its operation says so (or while pending: clustering was
    requested as one before table version 8), another replace otherwise."""
    action = instant.action
    if action == "commit" and state.config.is_mor:
        return "compaction"
    if action == "replacecommit":
        return "clustering" if operation == "CLUSTER" or not instant.is_completed else "replace"
    return _LANE_OF.get(action, "other")


def _instant_row(state: TableState, instant: Instant) -> InstantRow:
    timeline = state.timeline
    operation = None
    if instant.is_completed and instant.action in ("commit", "deltacommit", "replacecommit"):
        operation = timeline.commit_metadata(instant).get("operationType") or None
    completed = instant.completion_time if timeline.completion_times and instant.is_completed else None
    zone = timeline.timezone
    return InstantRow(
        instant.requested_time, completed, instant.action, _lane(state, instant, operation), instant.state,
        operation, instant_moment(instant.requested_time, zone), instant_moment(completed, zone) if completed else None,
    )


def _span_end(row: InstantRow) -> datetime | None:
    """Where an instant's bar ends: its completion, when the timeline records one after its request."""
    if row.completed_at is not None and row.requested_at is not None and row.completed_at > row.requested_at:
        return row.completed_at
    return None


def _title(row: InstantRow) -> str:
    what = f"{row.action}{f' ({row.operation})' if row.operation else ''} {row.requested}"
    if row.state != "COMPLETED":
        return f"{what}: {row.state.lower()}"
    if row.seconds is not None:
        return f"{what}: completed {row.completed}, after {row.seconds:.1f} s"
    return f"{what}: completed"


__all__ = ["FilesPage", "HealthPage", "NamespaceRow", "NoSuchTable", "Overview", "Pages", "TimelinePage"]
