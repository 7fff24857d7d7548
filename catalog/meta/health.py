"""The ``health`` metadata table: a table's health against named thresholds.

One row per check, each naming the threshold it compares to:

- ``small_files``: base files of the latest slices smaller than ``hoodie.parquet.small.file.limit``
  (the table's property, else Hudi's default of 100 MiB); ``WARN`` when a partition holds more
  than one (Hudi's writer tops up one small file per partition; more means it is not keeping up);
- ``log_backlog``: the file group with the most log files behind its base file (merge-on-read);
  ``WARN`` past ``hoodie.compact.inline.max.delta.commits`` (default 5), the number of delta
  commits after which Hudi schedules a compaction;
- ``pending_compaction`` and ``pending_clustering``: how many are pending and the age of the
  oldest; ``WARN`` past ``max_pending_age`` (a day unless given);
- ``metadata_table_lag``: completed data-table instants the metadata table has not recorded;
  ``WARN`` above 0.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import pyarrow as pa

from catalog.meta.config import metadata_lag, metadata_timeline
from catalog.meta.layout import GroupFacts, group_facts
from catalog.state import TableState
from catalog.timeline import Timeline
from catalog.timeline.instants import Instant

HEALTH_SCHEMA = pa.schema(
    [
        pa.field("check", pa.string(), nullable=False),
        pa.field("status", pa.string(), nullable=False),
        pa.field("value", pa.int64()),
        pa.field("threshold", pa.string(), nullable=False),
        pa.field("detail", pa.string(), nullable=False),
    ]
)

OK, WARN, INFO = "OK", "WARN", "INFO"
SMALL_FILE_LIMIT_KEY = "hoodie.parquet.small.file.limit"
DEFAULT_SMALL_FILE_LIMIT = 104_857_600
MAX_DELTA_COMMITS_KEY = "hoodie.compact.inline.max.delta.commits"
DEFAULT_MAX_DELTA_COMMITS = 5
DEFAULT_MAX_PENDING_AGE = timedelta(days=1)


@dataclass(frozen=True)
class Check:
    """One health check's outcome."""

    check: str
    status: str
    value: int | None
    threshold: str
    detail: str


def _int_property(state: TableState, key: str, default: int) -> tuple[int, str]:
    """A numeric table property and where it came from (the table, or Hudi's default)."""
    text = state.config.properties.get(key, "").strip()
    if text.isdigit():
        return int(text), f"{key} of the table"
    return default, f"{key} default"


def instant_moment(instant: str, zone: str) -> datetime | None:
    """When an instant (``yyyyMMddHHmmss[SSS]``) was written, in the timeline's zone (``UTC`` or
    this process's local zone); ``None`` for Hudi's reserved instants, which are no dates."""
    try:
        moment = datetime.strptime(instant[:14], "%Y%m%d%H%M%S")
    except ValueError:
        return None
    millis = instant[14:17]
    if millis.isdigit():
        moment = moment.replace(microsecond=int(millis) * 1000)
    return moment.replace(tzinfo=timezone.utc) if zone.upper() == "UTC" else moment.astimezone()


def _age(instant: Instant, timeline: Timeline, now: datetime) -> timedelta | None:
    moment = instant_moment(instant.requested_time, timeline.timezone)
    return now - moment if moment is not None else None


def _shown_age(age: timedelta | None) -> str:
    if age is None:
        return "age unknown"
    seconds = max(0, int(age.total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    return f"{days}d {hours}h {rest // 60}m" if days else f"{hours}h {rest // 60}m"


def _small_files(state: TableState, facts: list[GroupFacts]) -> Check:
    limit, source = _int_property(state, SMALL_FILE_LIMIT_KEY, DEFAULT_SMALL_FILE_LIMIT)
    small = Counter(f.file_slice.partition for f in facts if f.file_slice.base_file is not None
                    and f.file_slice.base_file.size < limit)
    bases = sum(1 for f in facts if f.file_slice.base_file is not None)
    crowded = sorted(p for p, n in small.items() if n > 1)
    detail = f"{sum(small.values())} of {bases} base files are smaller than {limit} bytes"
    if crowded:
        detail += f"; {len(crowded)} partition(s) hold more than one, e.g. {crowded[0] or '(root)'!r}"
    return Check(
        "small_files", WARN if crowded else OK, sum(small.values()),
        f"base file < {limit} bytes ({source}); WARN when a partition holds more than one", detail,
    )


def _log_backlog(state: TableState, facts: list[GroupFacts]) -> Check:
    limit, source = _int_property(state, MAX_DELTA_COMMITS_KEY, DEFAULT_MAX_DELTA_COMMITS)
    threshold = f"more than {limit} log files behind a base file ({source})"
    if not state.config.is_mor:
        return Check("log_backlog", OK, 0, threshold, "copy-on-write table: no log files")
    worst = max(facts, key=lambda f: (len(f.file_slice.log_files), sum(x.size for x in f.file_slice.log_files)),
                default=None)
    if worst is None or not worst.file_slice.log_files:
        return Check("log_backlog", OK, 0, threshold, "no file group has log files")
    fs = worst.file_slice
    behind = sum(1 for f in facts if len(f.file_slice.log_files) > limit)
    detail = (f"file group {fs.file_id} in {fs.partition or '(root)'!r}: {len(fs.log_files)} log files, "
              f"{sum(x.size for x in fs.log_files)} bytes; {behind} file group(s) past the threshold")
    return Check("log_backlog", WARN if behind else OK, len(fs.log_files), threshold, detail)


def _pending(name: str, instants: list[Instant], timeline: Timeline, now: datetime, max_age: timedelta) -> Check:
    threshold = f"pending longer than {_shown_age(max_age)}"
    if not instants:
        return Check(name, OK, 0, threshold, "none pending")
    oldest = min(instants, key=lambda i: i.requested_time)
    age = _age(oldest, timeline, now)
    late = age is not None and age > max_age
    detail = f"{len(instants)} pending; oldest {oldest.requested_time} ({oldest.state}), {_shown_age(age)} old"
    return Check(name, WARN if late else OK, len(instants), threshold, detail)


def _clustering(timeline: Timeline) -> list[Instant]:
    """Pending clustering: ``clustering`` instants (table version 8+) and pending replacecommits
    (before, clustering was requested as a replacecommit)."""
    return timeline.pending_instants("clustering", "replacecommit")


def _metadata_lag(state: TableState) -> Check:
    threshold = "more than 0 data-table instants not in the metadata table"
    mdt = metadata_timeline(state)
    if mdt is None:
        return Check("metadata_table_lag", INFO, None, threshold, "no metadata table")
    lag = metadata_lag(state.timeline, mdt)
    detail = f"metadata table current to {lag.current_to}, data table at {lag.data_latest}"
    return Check("metadata_table_lag", WARN if lag.behind else OK, lag.behind, threshold, detail)


def health_checks(state: TableState, now: datetime | None = None,
                  max_pending_age: timedelta = DEFAULT_MAX_PENDING_AGE) -> list[Check]:
    """The checks of the module docstring, in that order (``now``: the clock ages are measured by)."""
    now = now or datetime.now(timezone.utc)
    facts = list(group_facts(state.fs_view, None))
    timeline = state.timeline
    return [
        _small_files(state, facts),
        _log_backlog(state, facts),
        _pending("pending_compaction", timeline.pending_instants("compaction"), timeline, now, max_pending_age),
        _pending("pending_clustering", _clustering(timeline), timeline, now, max_pending_age),
        _metadata_lag(state),
    ]


def health_table(state: TableState, now: datetime | None = None) -> pa.Table:
    """:func:`health_checks` as rows."""
    rows = [c.__dict__ for c in health_checks(state, now)]
    return pa.Table.from_pylist(rows, schema=HEALTH_SCHEMA)


__all__ = ["HEALTH_SCHEMA", "Check", "health_checks", "health_table", "instant_moment"]
