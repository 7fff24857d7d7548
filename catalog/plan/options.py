"""The query options, defined once, and the resolution of their instants against a timeline.

:class:`ReadOptions` is the only definition of what a read can ask for (docs/reading.md);
every surface (the library, the Flight command, the client, the CLI, Spark, SQL) converts to and
from it, and ``schemas/command.schema.json`` mirrors it (a test keeps the two equal).

:func:`resolve` is the only place instants are interpreted: it pins the query instant, lists the
commits of an incremental range, and returns options with those instants written out, so that a
plan read later (a Flight ticket, another server) sees exactly the table state it was planned on.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Mapping

from catalog.errors import InvalidInstantError, InvalidQueryError, UnsupportedTableError, shown
from catalog.plan.filter_text import parse_filters
from catalog.plan.filters import FilterTuple, normalize_op
from catalog.table.bootstrap import FULL_BOOTSTRAP_INSTANT, METADATA_BOOTSTRAP_INSTANT
from catalog.timeline import Timeline

QUERY_TYPES = ("snapshot", "read_optimized", "incremental", "cdc")
#: query types that read a range of commits (``start`` exclusive, ``end`` inclusive)
RANGE_QUERY_TYPES = ("incremental", "cdc")
_INSTANT_FIELDS = frozenset({"as_of", "start", "end"})

#: the instant forms every surface accepts, as the one error message names them (docs/filters.md)
INSTANT_FORMS = (
    "yyyyMMddHHmmssSSS, yyyyMMddHHmmss or an ISO-8601 date or timestamp "
    "(2024-01-31, 2024-01-31T12:00:00[.SSS][Z|+hh:mm])"
)
_DIGITS = re.compile(r"\d{14}(?:\d{3})?")
#: Hudi's reserved instants, which are no dates: the initial instant (before every commit) and the
#: metadata-only and full-record bootstrap commits
_RESERVED_INSTANTS = ("0" * 14, METADATA_BOOTSTRAP_INSTANT, FULL_BOOTSTRAP_INSTANT)
_ISO = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})"
    r"(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?(Z|[+-]\d{2}(?::?\d{2})?)?)?$",
    re.IGNORECASE,
)


def _malformed(text: Any, what: str, why: str = "") -> InvalidInstantError:
    written = shown(repr(text), 66)  # text may come from the network
    reason = f" ({why})" if why else ""
    return InvalidInstantError(f"malformed {what} {written}{reason}: expected {INSTANT_FORMS}")


def _clock(text: Any, what: str, *fields: str | None) -> datetime:
    """The date and time of an instant's fields; impossible ones (month 13, 25:61) refused."""
    year, month, day, hour, minute, second = (int(f or 0) for f in fields)
    try:
        return datetime(year, month, day, hour, minute, second)
    except ValueError as err:
        raise _malformed(text, what, str(err)) from None


def _offset(zone: str) -> timezone:
    if zone.upper() == "Z":
        return timezone.utc
    sign = -1 if zone[0] == "-" else 1
    digits = zone[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:] or 0)
    if hours > 23 or minutes > 59:
        raise ValueError(f"zone offset {zone} out of range")
    return timezone(sign * timedelta(hours=hours, minutes=minutes))


def parse_instant(text: Any, what: str = "instant") -> str:
    """An instant as the user wrote it, checked, in its canonical form.

    ``yyyyMMddHHmmssSSS`` and ``yyyyMMddHHmmss`` stay as written (Hudi compares instants as
    strings; all zeros, Hudi's initial instant, means before every commit; ``00000000000001`` and
    ``00000000000002`` are the bootstrap commits). An ISO-8601 date
    means its midnight; an ISO timestamp without a zone is a wall clock time in the table's
    timeline zone (as in Hudi's Spark SQL) and becomes ``yyyyMMddHHmmssSSS`` here (digits past
    the millisecond are dropped: instants have none, so the comparisons stay exact). An ISO
    timestamp with a zone (``Z``, ``+02:00``) keeps it, as ``yyyy-MM-ddTHH:mm:ss.SSS+hh:mm``,
    until :func:`resolve` knows the table's zone.

    Raises:
        InvalidInstantError: another form, or an impossible date or time (month 13, 25:61).
    """
    if not isinstance(text, str):
        raise _malformed(text, what, f"a {type(text).__name__}, not a string")
    if len(text) > _KEPT_INSTANT_CHARS:  # a client's text: only short ones are kept
        return _canonical_instant(text, what)
    return _kept_canonical_instant(text, what)


#: instant texts longer than this (whitespace around a valid one, say) are parsed but not kept,
#: so the texts kept hold at most 1,024 x 64 characters whoever sends them
_KEPT_INSTANT_CHARS = 64


def _canonical_instant(text: str, what: str) -> str:
    """:func:`parse_instant` of a string."""
    value = text.strip()
    if _DIGITS.fullmatch(value):
        if value[:14] not in _RESERVED_INSTANTS:
            _clock(text, what, value[0:4], value[4:6], value[6:8], value[8:10], value[10:12], value[12:14])
        return value
    m = _ISO.match(value)
    if not m:
        raise _malformed(text, what)
    year, month, day, hour, minute, second, fraction, zone = m.groups()
    moment = _clock(text, what, year, month, day, hour, minute, second)
    millis = (fraction or "").ljust(3, "0")[:3]
    if zone is None:
        return f"{moment:%Y%m%d%H%M%S}{millis}"
    try:
        offset = _offset(zone)
    except ValueError as err:
        raise _malformed(text, what, str(err)) from None
    minutes = int(offset.utcoffset(None).total_seconds()) // 60
    sign = "-" if minutes < 0 else "+"
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{millis}{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


#: :func:`_canonical_instant`, kept: planning pins every query to the latest instant and checks it
#: again (a date check per query); a refused text raises and is not kept
_kept_canonical_instant = functools.lru_cache(maxsize=1024)(_canonical_instant)


def instant_in_zone(instant: str, zone: str) -> str:
    """A canonical instant (:func:`parse_instant`) written as the timeline of ``zone`` writes
    instants: ``UTC``, or ``LOCAL`` (this process's zone, as Java's default is the writer's)."""
    if _DIGITS.fullmatch(instant):
        return instant
    moment = datetime.fromisoformat(instant)
    local = moment.astimezone(timezone.utc if zone.upper() == "UTC" else None)
    return f"{local:%Y%m%d%H%M%S}{local.microsecond // 1000:03d}"


def _normalise_filter(raw: Any) -> FilterTuple:
    """One wire-form filter as a ``(column, op, value)`` tuple with its shape checked.

    Columns and value types are checked later, against the table schema (``bind_filters``).
    """
    if not isinstance(raw, (tuple, list)) or len(raw) not in (2, 3):
        raise InvalidQueryError(f"a filter must be a (column, op, value) tuple, got {raw!r}")
    column, op = raw[0], normalize_op(raw[1])
    if not isinstance(column, str):
        raise InvalidQueryError(f"a filter column must be a string, got {column!r}")
    if op in ("is null", "is not null"):
        return (column, op, None)
    if len(raw) < 3:
        raise InvalidQueryError(f"filter on {column!r}: operator {op!r} needs a value")
    value = raw[2]
    if op in ("in", "not in"):
        if not isinstance(value, (list, tuple)):
            raise InvalidQueryError(f"filter on {column!r}: operator {op!r} needs a list value")
        return (column, op, tuple(value))
    if isinstance(value, (list, tuple, set)):
        raise InvalidQueryError(f"filter on {column!r}: operator {op!r} needs a single value, not a list")
    return (column, op, value)


def _filter_json(item: FilterTuple) -> list[Any]:
    column, op, value = item
    if value is None:
        return [column, op]
    return [column, op, list(value) if isinstance(value, tuple) else value]


@dataclass(frozen=True)
class ReadOptions:
    """What to read. Meanings as in docs/reading.md:

    Attributes:
        columns: column names to return (``None``: all, meta columns first).
        filters: ``(column, op, value)`` tuples ANDed together; ops ``= != < <= > >= in not in
            is null is not null``. They prune and are applied to rows, so the result is exact.
            A string is read with the filter grammar (``"region in ('us', 'eu') and fare > 3"``).
        query_type: ``snapshot``, ``read_optimized``, ``incremental`` or ``cdc`` (change data
            capture: one row per change, see ``catalog.table.cdc``).
        as_of: time travel to an instant, inclusive: ``yyyyMMddHHmmssSSS``, ``yyyyMMddHHmmss``
            or an ISO-8601 date or timestamp (see :func:`parse_instant`).
        start: incremental or CDC range start (exclusive).
        end: incremental or CDC range end (inclusive).
        limit: at most this many rows.
    """

    columns: tuple[str, ...] | None = None
    filters: tuple[FilterTuple, ...] = ()
    query_type: str = "snapshot"
    as_of: str | None = None
    start: str | None = None
    end: str | None = None
    limit: int | None = None

    def __post_init__(self) -> None:
        columns = self.columns
        if columns is not None:
            if isinstance(columns, str) or not all(isinstance(c, str) for c in columns):
                raise InvalidQueryError(f"columns must be a list of column names, got {columns!r}")
            object.__setattr__(self, "columns", tuple(columns))
        filters: Any = self.filters if self.filters is not None else ()
        if isinstance(filters, str):
            filters = parse_filters(filters)  # the text form (docs/filters.md)
        if isinstance(filters, (tuple, list)) and len(filters) in (2, 3) and isinstance(filters[0], str):
            filters = [filters]  # a single (column, op, value) tuple
        if not isinstance(filters, (tuple, list)):
            raise InvalidQueryError(f"filters must be a list of (column, op, value) tuples, got {filters!r}")
        object.__setattr__(self, "filters", tuple(_normalise_filter(f) for f in filters))
        qt = (self.query_type or "snapshot").strip().lower().replace("-", "_")
        if qt not in QUERY_TYPES:
            raise InvalidQueryError(f"unknown query_type {self.query_type!r}; expected one of {', '.join(QUERY_TYPES)}")
        object.__setattr__(self, "query_type", qt)
        limit = self.limit
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
            raise InvalidQueryError(f"limit must be a non-negative integer, got {limit!r}")
        self._check_instants()

    def _check_instants(self) -> None:
        """Parse ``as_of``, ``start`` and ``end`` and check they suit the query type."""
        qt = self.query_type
        if qt not in RANGE_QUERY_TYPES and (self.start is not None or self.end is not None):
            raise InvalidQueryError("start/end apply only to query_type='incremental' or 'cdc'")
        if qt in RANGE_QUERY_TYPES and self.as_of is not None:
            raise InvalidQueryError(f"as_of does not apply to {qt} queries; use start/end")
        for name in ("as_of", "start", "end"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, parse_instant(value, name))
        if qt == "cdc" and self.start and self.end and _DIGITS.fullmatch(self.start) and _DIGITS.fullmatch(self.end) \
                and self.start > self.end:
            raise InvalidQueryError(f"CDC range start {self.start} is after its end {self.end}")  # as Hudi refuses

    @property
    def read_optimized(self) -> bool:
        return self.query_type == "read_optimized"

    @property
    def incremental(self) -> bool:
        return self.query_type == "incremental"

    @property
    def cdc(self) -> bool:
        return self.query_type == "cdc"

    def replace(self, **changes: Any) -> "ReadOptions":
        """A copy with ``changes``. Pinning an instant (``as_of``, ``start``, ``end`` only, as
        planning does on every query) checks just the instants: the rest was checked already."""
        if changes and changes.keys() <= _INSTANT_FIELDS:
            pinned = copy.copy(self)
            for name, value in changes.items():
                object.__setattr__(pinned, name, value)
            pinned._check_instants()
            return pinned
        return dataclasses.replace(self, **changes)

    # -- wire form ------------------------------------------------------------------------
    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    def to_json(self) -> dict[str, Any]:
        """The JSON form (keys with default values left out; filters as lists)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value == f.default:
                continue
            if f.name == "columns":
                value = list(value)
            elif f.name == "filters":
                value = [_filter_json(item) for item in value]
            out[f.name] = value
        return out

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "ReadOptions":
        """Options from their JSON form (other keys, such as a command's ``table``, are ignored)."""
        known = cls.field_names()
        return cls(**{k: doc[k] for k in known if doc.get(k) is not None})


@dataclass(frozen=True)
class ResolvedRead:
    """A query's options with their instants resolved against one timeline.

    Attributes:
        options: the options with ``as_of`` (snapshot, read-optimized) or ``end`` (incremental,
            CDC) written out, so that the same read later sees the same table state.
        instant: the query instant (a requested time); ``None`` for a table without commits.
        incremental_instants: requested times of the commits an incremental or CDC read returns.
        full_table_scan: the incremental range reaches archived commits of a table (version 8+),
            whose file versions may be gone (or, found by the planner, a file the range wrote is
            gone); as Hudi 1.x does, the rows then come from the latest snapshot of every file
            group, kept when their commit time is in range (``instant`` is the latest commit), and
            ``_hoodie_file_name`` names the latest slice.
    """

    options: ReadOptions
    instant: str | None
    incremental_instants: tuple[str, ...] = ()
    full_table_scan: bool = False


def resolve(options: ReadOptions, timeline: Timeline) -> ResolvedRead:
    """Pin ``options`` to ``timeline`` (format doc 3.6 and 7.5 for the instant rules).

    Raises:
        InvalidInstantError: ``as_of`` lies before the table's first commit, or before the oldest
            instant whose files the cleaner kept (Hudi refuses both).
    """
    options = _in_timeline_zone(options, timeline)
    commits = timeline.commits
    if options.cdc:
        return _resolve_cdc(options, timeline)
    horizon = timeline.clean_horizon
    if options.incremental:
        chosen = timeline.instants_in_range(options.start, options.end)
        if not timeline.completion_times:
            # table version 5 or 6: Hudi 0.x's incremental query (without its full-table-scan
            # fallback, off by default) returns the range's commits of the active timeline only
            chosen = [i for i in chosen if not timeline.needs_archive(i.requested_time)]
        requested = tuple(i.requested_time for i in chosen)
        pinned = options
        if options.end is None and chosen:
            pinned = options.replace(end=max(timeline.range_time(i) for i in chosen))
        if requested and timeline.needs_archive(min(requested)):
            # archived commits (table version 8+: those of 5 and 6 are left out above): as Hudi 1.x
            # does, the range is answered by a full table scan
            return ResolvedRead(pinned, commits[-1].requested_time, requested, full_table_scan=True)
        return ResolvedRead(pinned, max(requested) if requested else None, requested)
    if options.as_of is not None and horizon is not None and options.as_of < horizon:
        raise InvalidInstantError(
            f"as_of {options.as_of} is before {horizon}, the oldest instant whose files the cleaner kept: "
            "time travel cannot reach cleaned instants"
        )
    if options.as_of is not None:
        if commits and options.as_of < commits[0].requested_time:
            commits = timeline.all_commits(options.as_of)  # time travel into the archived timeline
        if not commits or options.as_of < commits[0].requested_time:
            first = commits[0].requested_time if commits else "none"
            raise InvalidInstantError(f"as_of {options.as_of} is before the table's first commit ({first})")
        return ResolvedRead(options, options.as_of)
    if not commits:
        return ResolvedRead(options, None)
    latest = commits[-1].requested_time
    return ResolvedRead(options.replace(as_of=latest), latest)


def _in_timeline_zone(options: ReadOptions, timeline: Timeline) -> ReadOptions:
    """``options`` with instants given with a zone written in the timeline's zone."""
    changes = {}
    for name in ("as_of", "start", "end"):
        value = getattr(options, name)
        if value is not None and not _DIGITS.fullmatch(value):
            changes[name] = instant_in_zone(value, timeline.timezone)
    return options.replace(**changes) if changes else options


def _resolve_cdc(options: ReadOptions, timeline: Timeline) -> ResolvedRead:
    """A CDC range compares *requested* times in every table version (Hudi's
    ``HoodieCDCExtractor``), unlike the incremental query of table version 8+.

    Raises:
        UnsupportedTableError: the range reaches commits of the archived timeline (Hudi's CDC
            query reads the active timeline only and would leave them out).
    """
    start, end = options.start, options.end
    if timeline.needs_archive(start) and any(
        (start is None or i.requested_time > start) and (end is None or i.requested_time <= end)
        for i in timeline.archived_commits
    ):
        raise UnsupportedTableError(
            f"CDC query range ({start or 'beginning'}, {end or 'latest'}] reaches archived commits; "
            f"start at or after {timeline.start}"
        )
    chosen = tuple(
        i.requested_time
        for i in timeline.commits
        if (start is None or i.requested_time > start) and (end is None or i.requested_time <= end)
    )
    latest = timeline.latest_commit
    if end is None and latest is not None:
        options = options.replace(end=latest.requested_time)
    instant = options.end if latest is not None else None
    return ResolvedRead(options, instant, chosen)


def read_options(options: ReadOptions | None = None, /, **kwargs: Any) -> ReadOptions:
    """``options`` updated with ``kwargs`` (the fields of :class:`ReadOptions`), or new options."""
    if options is None:
        return ReadOptions(**kwargs)
    return options.replace(**kwargs) if kwargs else options


__all__ = [
    "INSTANT_FORMS",
    "QUERY_TYPES",
    "RANGE_QUERY_TYPES",
    "ReadOptions",
    "ResolvedRead",
    "instant_in_zone",
    "parse_instant",
    "read_options",
    "resolve",
]
